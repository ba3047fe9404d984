import struct

import pytest
from chess_testdata import FIXTURES, load_json

from zoo.chess.bag import BagReader, BagWriter, decode_record, encode_record, shard_paths

BAGS = FIXTURES / "bags"


@pytest.mark.parametrize("name", ["sample_action_value.bag", "sample_state_value.bag", "sample_behavioral_cloning.bag"])
def test_read_decode_encode_write_official_bags(name, tmp_path):
    info = load_json("bags/records.json")[name]
    reader = BagReader(BAGS / name)
    assert len(reader) == info["num_records"]
    assert [r.hex() for r in reader] == info["raw_hex"]
    records = [decode_record(info["kind"], r) for r in reader]
    assert [list(r) for r in records] == info["records"]
    with BagWriter(tmp_path / name) as writer:
        writer.write_all(encode_record(info["kind"], *r) for r in records)
    assert (tmp_path / name).read_bytes() == (BAGS / name).read_bytes()


def test_sharded_bag_reads_as_one_sequence():
    sharded = BagReader(BAGS / "sample_action_value@2.bag")
    assert [p.name for p in shard_paths(BAGS / "sample_action_value@2.bag")] == load_json("bags/records.json")["sample_action_value@2.bag"]["files"]
    assert list(sharded) == list(BagReader(BAGS / "sample_action_value.bag"))
    assert sharded[-1] == sharded[9] and sharded[3:5] == list(sharded)[3:5]
    with pytest.raises(IndexError):
        sharded[10]


def test_raw_records_including_empty(tmp_path):
    hexes = load_json("bags/records.json")["raw_bytes.bag"]["records_hex"]
    assert [r.hex() for r in BagReader(BAGS / "raw_bytes.bag")] == hexes
    with BagWriter(tmp_path / "raw.bag") as writer:
        writer.write_all(bytes.fromhex(h) for h in hexes)
    assert (tmp_path / "raw.bag").read_bytes() == (BAGS / "raw_bytes.bag").read_bytes()
    (tmp_path / "empty.bag").write_bytes(b"")
    assert len(BagReader(tmp_path / "empty.bag")) == 0


def test_corrupt_and_missing_bags_raise(tmp_path):
    (tmp_path / "bad.bag").write_bytes(b"hello" + struct.pack("<q", 999))
    with pytest.raises(ValueError, match="not a .bag file"):
        BagReader(tmp_path / "bad.bag")
    with pytest.raises(FileNotFoundError, match="not found"):
        BagReader(tmp_path / "nothing@3.bag")
    with pytest.raises(ValueError, match="double"):
        decode_record("state_value", b"\x01a\x00")


def test_failed_write_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError):
        with BagWriter(tmp_path / "x.bag") as writer:
            writer.write(b"abc")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_reader_pickles_for_dataloader_workers():
    import pickle

    reader = BagReader(BAGS / "sample_action_value@2.bag")
    first = reader[0]  # opens the memory maps
    clone = pickle.loads(pickle.dumps(reader))
    assert list(clone) == list(reader) and clone[0] == first
