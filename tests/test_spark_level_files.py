"""The files the Spark engine's executors write themselves (spark_check.level_files): state groups read
back by id, and each deduplication partition's visited fingerprints."""
import pickle

import numpy as np
import pytest

from rabbitproof.spark_check.level_files import (
    GroupReader,
    GroupWriter,
    drop_visited_after,
    drop_visited_before,
    group_id,
    new_in_partition,
    visited_before,
    write_visited,
)


def test_groups_are_read_back_by_id_from_every_task_attempt(tmp_path):
    ids = {}
    for part, attempt in ((0, 0), (3, 0), (3, 1)):
        writer = GroupWriter(str(tmp_path), part, attempt)
        for g in range(3):
            ids[part, attempt, g] = writer.add(pickle.dumps([part, attempt, g] * (g + 1)))
        writer.close()
    reader = GroupReader(str(tmp_path))
    for (part, attempt, g), grp in sorted(ids.items(), key=lambda kv: -kv[1]):
        assert pickle.loads(reader.get(grp)) == [part, attempt, g] * (g + 1)
    reader.close()
    assert ids[3, 1, 2] == group_id(3, 1, 2) == (3 << 40) | (1 << 32) | 2
    assert not list(tmp_path.glob("*.tmp"))


def test_a_writer_with_no_group_writes_no_file(tmp_path):
    GroupWriter(str(tmp_path / "states"), 1, 0).close()
    assert not (tmp_path / "states").exists()


def test_a_group_id_out_of_range_is_refused():
    with pytest.raises(ValueError, match="attempt 256"):
        group_id(0, 256, 0)


def test_deduplication_keeps_the_first_candidate_of_each_unseen_fingerprint():
    visited = np.array([-5, 2, 9], dtype=np.int64)
    candidates = np.array([9, 4, -7, 4, 2, 11, -7], dtype=np.int64)
    keep, merged = new_in_partition(visited, candidates)
    assert sorted(candidates[keep].tolist()) == [-7, 4, 11]
    assert sorted(keep.tolist()) == [1, 2, 5]           # the first of each repeated fingerprint
    assert merged.tolist() == [-7, -5, 2, 4, 9, 11]
    keep, merged = new_in_partition(np.zeros(0, dtype=np.int64), np.array([3, 3, 1], dtype=np.int64))
    assert sorted(keep.tolist()) == [0, 2] and merged.tolist() == [1, 3]
    keep, merged = new_in_partition(merged, np.array([1, 3], dtype=np.int64))
    assert keep.tolist() == [] and merged.tolist() == [1, 3]


def test_a_partition_reads_its_newest_visited_file_before_the_level(tmp_path):
    root = str(tmp_path)
    assert visited_before(root, 0, 0).tolist() == []
    write_visited(root, 0, 0, np.array([1], dtype=np.int64))
    write_visited(root, 0, 2, np.array([1, 5], dtype=np.int64))     # level 1 gave partition 0 no row
    write_visited(root, 1, 1, np.array([7], dtype=np.int64))
    assert visited_before(root, 0, 2).tolist() == [1]
    assert visited_before(root, 0, 3).tolist() == [1, 5]
    assert visited_before(root, 1, 3).tolist() == [7]
    drop_visited_after(root, 1)                     # a resume from level 1 forgets level 2's file
    assert visited_before(root, 0, 3).tolist() == [1]
    write_visited(root, 0, 2, np.array([1, 5], dtype=np.int64))
    drop_visited_before(root, 2)                    # only the newest file of each partition stays
    assert sorted(p.name for p in (tmp_path / "part-0").iterdir()) == ["level=2.parquet"]
    assert sorted(p.name for p in (tmp_path / "part-1").iterdir()) == ["level=1.parquet"]
