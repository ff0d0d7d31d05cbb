"""Tests for npu_dump_hook.bundle._fs and ._archive: safe paths, walking, link/copy, staging, archives."""
import hashlib
import io
import os
import tarfile

import pytest

from npu_dump_hook.bundle import _archive, _fs, _staging
from npu_dump_hook.errors import BundleError, BundleExistsError, UnsafePathError

ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# -- safe_relpath ----------------------------------------------------------------------------
@pytest.mark.parametrize("rel, expected", [
    ("a/b/c", "a/b/c"),
    ("./a//b/", "a/b"),
    ("dump/20240101/0/x.1.2.3", "dump/20240101/0/x.1.2.3"),
    ("..a/b..", "..a/b.."),
])
def test_safe_relpath_normalizes(rel, expected):
    assert _fs.safe_relpath(rel) == expected


@pytest.mark.parametrize("rel, part", [
    ("/etc/passwd", "absolute"),
    ("a/../../b", "'..'"),
    ("..", "'..'"),
    ("", "empty"),
    (".", "root itself"),
    ("a\x00b", "NUL"),
    ("C:/windows", "absolute"),
])
def test_safe_relpath_rejects(rel, part):
    with pytest.raises(UnsafePathError) as info:
        _fs.safe_relpath(rel)
    assert part in str(info.value)


_PLAIN = ["a/b/c", "./a//b/", "dump/20240101/0/x.1.2.3", "..a/b..", "a/./b", "ab:c", "a\n/b", "a\nb:c"]
_REFUSED = ["/etc/passwd", "a/../../b", "..", "", ".", "./", "/", "a\x00b", "C:/windows", "x:y", "\n:x", "././/."]


@pytest.mark.parametrize("rel", _PLAIN + _REFUSED)
def test_plainly_relative_never_passes_a_path_safe_relpath_refuses(rel):
    """The quick pass over all of bundle.json's paths at once says True only when the rule itself
    accepts each (alone, and among plain ones in any position)."""
    try:
        _fs.safe_relpath(rel)
        accepted = True
    except UnsafePathError:
        accepted = False
    for paths in ([rel], ["a/b", rel], [rel, "a/b"], ["a/b", rel, "c/d"]):
        assert not _fs.plainly_relative(paths) or accepted, paths
    if rel in ("a/b/c", "dump/20240101/0/x.1.2.3", "a/./b", "ab:c"):
        assert _fs.plainly_relative(["a/b", rel, "c/d"])  # the common paths take the quick pass


def test_safe_join_stays_under_root(tmp_path):
    assert _fs.safe_join(str(tmp_path), "x/y") == os.path.join(str(tmp_path), "x", "y")
    with pytest.raises(UnsafePathError):
        _fs.safe_join(str(tmp_path), "x/../../y")


# -- walk_files ------------------------------------------------------------------------------
def test_walk_files_sorted_and_symlinks(tmp_path):
    src = tmp_path / "src"
    (src / "b").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"abc")
    (src / "b" / "z").write_bytes(b"12345")
    outside = tmp_path / "secret"
    outside.write_bytes(b"do not read")
    os.symlink(str(outside), str(src / "b" / "leak"))
    os.symlink(str(src / "a.txt"), str(src / "b" / "inside"))
    os.symlink(str(tmp_path), str(src / "dirlink"))
    os.mkfifo(str(src / "fifo"))
    warnings = []
    found = list(_fs.walk_files(str(src), warnings))
    assert [(f.rel, f.size) for f in found] == [("a.txt", 3), ("b/inside", 3), ("b/z", 5)]
    assert found[1].path == os.path.realpath(str(src / "a.txt"))
    assert len(warnings) == 3
    assert any("leak" in w for w in warnings)
    assert any("dirlink" in w for w in warnings)
    assert any("fifo" in w and "not a regular file" in w for w in warnings)


def test_walk_files_strict_mode_reports_every_symlink(tmp_path):
    # For checking a bag: even a link to a regular file inside the tree is reported, not read.
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"abc")
    os.symlink("a", str(src / "same_bytes"))
    warnings = []
    assert [f.rel for f in _fs.walk_files(str(src), warnings, in_tree_links=False)] == ["a"]
    assert len(warnings) == 1 and "same_bytes" in warnings[0] and "not followed" in warnings[0]


def test_walk_files_never_walks_a_symlinked_root(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x")
    os.symlink(str(tmp_path / "real"), str(tmp_path / "link"))
    warnings = []
    assert list(_fs.walk_files(str(tmp_path / "link"), warnings)) == []
    assert len(warnings) == 1 and str(tmp_path / "link") in warnings[0]


# -- place_file ------------------------------------------------------------------------------
@pytest.mark.parametrize("link, how", [("auto", "hardlink"), ("hardlink", "hardlink"), ("copy", "copy")])
def test_place_file_modes(tmp_path, link, how):
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    os.utime(str(src), ns=(1_000_000_000, 2_000_000_000))
    dst = tmp_path / "d"
    placed = _fs.place_file(str(src), str(dst), link=link, checksum=True)
    assert placed == _fs.PlacedFile(3, ABC_SHA256, how)
    assert dst.read_bytes() == b"abc"
    assert (os.stat(str(src)).st_ino == os.stat(str(dst)).st_ino) == (how == "hardlink")
    assert os.stat(str(src)).st_mtime_ns == 2_000_000_000
    assert os.stat(str(dst)).st_mtime_ns == 2_000_000_000


def test_place_file_copy_without_checksum(tmp_path):
    src = tmp_path / "s"
    data = os.urandom(3 * _fs.CHUNK_SIZE + 17)
    src.write_bytes(data)
    placed = _fs.place_file(str(src), str(tmp_path / "d"), link="copy", checksum=False)
    assert placed == _fs.PlacedFile(len(data), None, "copy")
    assert (tmp_path / "d").read_bytes() == data
    assert _fs.sha256_file(str(tmp_path / "d")) == (len(data), hashlib.sha256(data).hexdigest())


def test_place_file_auto_falls_back_to_copy(tmp_path, monkeypatch):
    import errno

    def no_link(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    src = tmp_path / "s"
    src.write_bytes(b"abc")
    assert _fs.place_file(str(src), str(tmp_path / "d"), link="auto").how == "copy"
    with pytest.raises(BundleError) as info:
        _fs.place_file(str(src), str(tmp_path / "e"), link="hardlink")
    assert "cannot hard-link" in str(info.value) and "cross-device" in str(info.value)


def test_place_file_rejects_unknown_mode(tmp_path):
    with pytest.raises(BundleError) as info:
        _fs.place_file("x", str(tmp_path / "d"), link="reflink")
    assert "reflink" in str(info.value)


def test_parallel_map_keeps_order_and_bounds_window():
    import threading

    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def work(x):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        with lock:
            state["now"] -= 1
        return x * x

    assert list(_fs.parallel_map(work, range(200), workers=3, window=5)) == [x * x for x in range(200)]
    assert 1 <= state["max"] <= 3



def test_parallel_map_runs_inline_items_in_caller_thread_in_order():
    import threading
    import time

    caller = threading.get_ident()
    ran_on = {}

    def work(x):
        if x % 10 == 0:
            time.sleep(0.01)  # a slow pool item: inline items behind it must not wait for it
        ran_on[x] = threading.get_ident()
        return -x

    got = list(_fs.parallel_map(work, range(60), workers=2, window=2, inline=lambda x: x % 10 != 0))
    assert got == [-x for x in range(60)]
    assert all((ran_on[x] == caller) == (x % 10 != 0) for x in range(60))


def test_parallel_map_inline_error_surfaces_in_input_order():
    import time

    def work(x):
        if x == 0:
            time.sleep(0.05)  # still running on the pool when item 3 fails inline
        if x == 3:
            raise ValueError("item 3")
        return x

    seen = []
    with pytest.raises(ValueError, match="item 3"):
        for value in _fs.parallel_map(work, range(8), workers=2, inline=lambda x: x != 0):
            seen.append(value)
    assert seen == [0, 1, 2]


def test_hashing_reuses_buffer_without_stale_bytes(tmp_path):
    big = os.urandom(2 * _fs.CHUNK_SIZE + 5)
    small = b"tail"
    (tmp_path / "big").write_bytes(big)
    (tmp_path / "small").write_bytes(small)
    # the small file is read into the buffer the big one filled: only its own bytes may count
    assert _fs.sha256_file(str(tmp_path / "big")) == (len(big), hashlib.sha256(big).hexdigest())
    assert _fs.sha256_file(str(tmp_path / "small")) == (4, hashlib.sha256(small).hexdigest())
    placed = _fs.place_file(str(tmp_path / "small"), str(tmp_path / "copy"), link="copy")
    assert (placed.size, placed.sha256, placed.how, placed.head) == (4, hashlib.sha256(small).hexdigest(), "copy", None)
    assert (tmp_path / "copy").read_bytes() == small


def test_hashing_in_threads_gives_each_file_its_digest(tmp_path):
    blobs = [os.urandom(_fs.CHUNK_SIZE // 2 + i * 997) for i in range(12)]
    paths = []
    for i, blob in enumerate(blobs):
        (tmp_path / str(i)).write_bytes(blob)
        paths.append(str(tmp_path / str(i)))
    got = list(_fs.parallel_map(_fs.sha256_file, paths, workers=4))
    assert got == [(len(b), hashlib.sha256(b).hexdigest()) for b in blobs]

# -- Staging ---------------------------------------------------------------------------------
def test_staging_commit_and_refuse_existing(tmp_path):
    dest = tmp_path / "out"
    with _staging.Staging(str(dest)) as st:
        assert os.path.basename(st.path).startswith(".out.staging-{}-".format(os.getpid()))
        (tmp_path / st.path / "f").write_bytes(b"new")
        st.commit()
    assert (dest / "f").read_bytes() == b"new"
    assert sorted(os.listdir(str(tmp_path))) == ["out"]
    with pytest.raises(BundleExistsError) as info:
        _staging.Staging(str(dest))
    assert "not empty" in str(info.value) and info.value.path == str(dest)
    assert isinstance(info.value, FileExistsError)


def test_staging_empty_destination_is_replaced(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    with _staging.Staging(str(dest)) as st:
        open(os.path.join(st.path, "f"), "w").close()
        st.commit()
    assert os.listdir(str(dest)) == ["f"]


def test_staging_force_replaces_only_after_commit(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old").write_bytes(b"old")
    st = _staging.Staging(str(dest), force=True)
    (tmp_path / st.path / "new").write_bytes(b"new")
    assert (dest / "old").exists()  # untouched until commit
    st.commit()
    assert os.listdir(str(dest)) == ["new"]
    assert sorted(os.listdir(str(tmp_path))) == ["out"]


def test_staging_removed_on_error(tmp_path):
    dest = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with _staging.Staging(str(dest)) as st:
            open(os.path.join(st.path, "f"), "w").close()
            raise RuntimeError("boom")
    assert os.listdir(str(tmp_path)) == []


def test_staging_refuses_destination_that_appears(tmp_path):
    dest = tmp_path / "out"
    st = _staging.Staging(str(dest))
    dest.mkdir()
    (dest / "other").write_bytes(b"x")
    with pytest.raises(BundleExistsError):
        st.commit()
    st.abort()
    assert os.listdir(str(dest)) == ["other"]


def test_staging_file_no_clobber(tmp_path):
    dest = tmp_path / "out.tar"
    st = _staging.Staging(str(dest), as_file=True, suffix=".tar")
    with open(st.path, "wb") as fh:
        fh.write(b"archive")
    dest.write_bytes(b"someone else")
    with pytest.raises(BundleExistsError):
        st.commit()
    st.abort()
    assert dest.read_bytes() == b"someone else"
    st2 = _staging.Staging(str(dest), as_file=True, force=True)
    with open(st2.path, "wb") as fh:
        fh.write(b"mine")
    st2.commit()
    assert dest.read_bytes() == b"mine"
    assert sorted(os.listdir(str(tmp_path))) == ["out.tar"]


def test_sweep_removes_dead_process_leftovers(tmp_path):
    dead_pid = 2 ** 22 + 12345  # above the default pid_max: never alive
    stale = tmp_path / ".out.staging-{}-abc".format(dead_pid)
    stale.mkdir()
    live = tmp_path / ".out.staging-{}-abc".format(os.getpid())
    live.mkdir()
    removed = _staging.sweep_stale_staging(str(tmp_path / "out"))
    assert removed == [str(stale)]
    assert live.exists()


def test_atomic_write_bytes(tmp_path):
    target = tmp_path / "index.json"
    target.write_bytes(b"old")
    _fs.atomic_write_bytes(str(target), b"new")
    assert target.read_bytes() == b"new"
    assert os.listdir(str(tmp_path)) == ["index.json"]


# -- archives --------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, name", [("tar", "b.tar"), ("tar.gz", "b.tar.gz")])
def test_archive_round_trip(tmp_path, fmt, name):
    src = tmp_path / "src"
    (src / "data" / "d").mkdir(parents=True)
    (src / "bagit.txt").write_bytes(b"x")
    (src / "data" / "d" / "f").write_bytes(b"abc")
    os.link(str(src / "data" / "d" / "f"), str(src / "data" / "g"))  # hard links become regular members
    out = tmp_path / name
    _archive.pack_archive(str(src), str(out), fmt, "bundle")
    assert _archive.archive_format(str(out)) == fmt
    with tarfile.open(str(out)) as tar:
        members = tar.getmembers()
    assert all(m.isfile() or m.isdir() for m in members)
    assert sorted(m.name for m in members if m.isfile()) == ["bundle/bagit.txt", "bundle/data/d/f", "bundle/data/g"]
    dest = tmp_path / "x"
    dest.mkdir()
    assert _archive.extract_archive(str(out), str(dest)) == ["bundle"]
    assert (dest / "bundle" / "data" / "g").read_bytes() == b"abc"


def _tar_with(path, member, data=b"", **attrs):
    with tarfile.open(str(path), "w") as tar:
        ok = tarfile.TarInfo("b/ok")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"ok"))
        info = tarfile.TarInfo(member)
        for key, value in attrs.items():
            setattr(info, key, value)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data) if data else None)


@pytest.mark.parametrize("member, attrs, part", [
    ("../evil", {}, "'..'"),
    ("b/../../evil", {}, "'..'"),
    ("/etc/evil", {}, "absolute"),
    ("b/link", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, "is a link"),
    ("b/hard", {"type": tarfile.LNKTYPE, "linkname": "b/ok"}, "is a link"),
    ("b/dev", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, "device"),
    ("b/fifo", {"type": tarfile.FIFOTYPE}, "device, FIFO"),
])
def test_extract_rejects_malicious(tmp_path, member, attrs, part):
    archive = tmp_path / "evil.tar"
    _tar_with(archive, member, b"pwn" if not attrs else b"", **attrs)
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(UnsafePathError) as info:
        _archive.extract_archive(str(archive), str(dest))
    assert part in str(info.value) and repr(member) in str(info.value)
    assert not (tmp_path / "evil").exists()


def test_extract_rejects_garbage(tmp_path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 10)
    with pytest.raises(BundleError) as info:
        _archive.extract_archive(str(junk), str(tmp_path))
    assert "junk.tar" in str(info.value)


def test_extract_checks_every_member_before_writing_anything(tmp_path):
    # The hostile member comes last: before, the good members before it were already written.
    archive = tmp_path / "evil.tar"
    _tar_with(archive, "b/link", type=tarfile.SYMTYPE, linkname="/etc/passwd")
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(UnsafePathError):
        _archive.extract_archive(str(archive), str(dest))
    assert os.listdir(str(dest)) == []


def _gzip_bomb(path, size):
    """A tar.gz whose one member lists ``size`` zero bytes: concatenated gzip members, so the
    file costs no compression time (1 GiB of zeros -> about 1 MB, as `gzip -9` makes it)."""
    import gzip

    info = tarfile.TarInfo("b/data/zeros")
    info.size = size
    chunk = gzip.compress(bytes(1 << 20), 9)
    with open(str(path), "wb") as out:
        out.write(gzip.compress(info.tobuf(tarfile.PAX_FORMAT)))
        for _ in range(size >> 20):
            out.write(chunk)
        out.write(gzip.compress(bytes(10240)))


def test_gzip_bomb_is_refused_before_anything_is_decompressed_or_written(tmp_path, monkeypatch):
    # Reproduction: a 1 MB .tar.gz made verify write 0.96 GiB into its temp folder.
    from npu_dump_hook import bundle

    bomb = tmp_path / "bomb.tar.gz"
    _gzip_bomb(bomb, 1 << 30)
    assert os.path.getsize(str(bomb)) < 1100000
    written = []
    real = _archive._extract_member
    monkeypatch.setattr(_archive, "_extract_member", lambda *a: written.append(a[2]) or real(*a))
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(UnsafePathError) as info:
        _archive.extract_archive(str(bomb), str(dest))
    assert "bundle-format.md rule 7" in str(info.value) and str(bomb) in str(info.value)
    assert written == [] and os.listdir(str(dest)) == []
    (problem,) = bundle.verify_bundle(str(bomb))  # a listed problem, not an exception
    assert problem.kind == "unsafe" and "above the bound" in problem.detail
    assert written == []
    with pytest.raises(UnsafePathError):
        bundle.read_bundle(str(bomb))


def test_expansion_bound_counts_the_decompressed_stream_not_only_listed_sizes(tmp_path, monkeypatch):
    # Many small members (or huge pax headers) expand without any one listed size being large:
    # the decompressed stream itself is counted and cut at the bound, before anything is written.
    monkeypatch.setattr(_archive, "RATIO_FREE_BYTES", 64 << 10)
    monkeypatch.setattr(_archive, "MAX_RATIO", 2)
    archive = tmp_path / "many.tar.gz"
    with tarfile.open(str(archive), "w:gz") as tar:
        for i in range(400):
            info = tarfile.TarInfo("b/f{:04d}".format(i) + "x" * 200)  # long names: pax headers
            info.size = 0
            tar.addfile(info)
    assert os.path.getsize(str(archive)) * 2 < 64 << 10
    dest = tmp_path / "x"
    dest.mkdir()
    with pytest.raises(UnsafePathError) as info:
        _archive.extract_archive(str(archive), str(dest))
    assert "expands to more than" in str(info.value)
    assert os.listdir(str(dest)) == []


def test_expansion_limit_values():
    mib = 1 << 20
    assert _archive.expansion_limit(0) == _archive.RATIO_FREE_BYTES == 256 * mib
    assert _archive.expansion_limit(1 * mib) == 256 * mib  # small archives: the floor
    assert _archive.expansion_limit(10 * mib) == 2000 * mib  # 200:1 above it
    assert _archive.expansion_limit(10 << 40) == _archive.MAX_EXPANDED_BYTES == 1 << 40


def test_extract_writes_at_most_the_listed_size(tmp_path):
    archive = tmp_path / "a.tar"
    _tar_with(archive, "b/more", b"0123456789")
    dest = tmp_path / "x"
    dest.mkdir()
    _archive.extract_archive(str(archive), str(dest))
    assert (dest / "b" / "more").read_bytes() == b"0123456789"
    assert (dest / "b" / "ok").read_bytes() == b"ok"


def test_archive_of_a_bag_made_with_tar_dot_is_accepted(tmp_path):
    # `tar -C b -czf x.tgz .` writes the members ".", "./bagit.txt", "./data/...": the "." folder
    # is the archive root, not an unsafe name.
    src = tmp_path / "b"
    (src / "data").mkdir(parents=True)
    (src / "bagit.txt").write_bytes(b"x")
    (src / "data" / "f").write_bytes(b"abc")
    archive = tmp_path / "x.tgz"
    with tarfile.open(str(archive), "w:gz") as tar:
        tar.add(str(src), arcname=".")
    with tarfile.open(str(archive)) as tar:
        assert tar.getnames()[0] == "."
    dest = tmp_path / "x"
    dest.mkdir()
    assert _archive.extract_archive(str(archive), str(dest)) == ["bagit.txt", "data"]
    assert (dest / "data" / "f").read_bytes() == b"abc"
    assert [rel for rel, _m, _t in _archive.iter_members(str(archive))] == ["bagit.txt", "data", "data/f"]
    for name in ("/", "./..", "./x/../.."):
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        with pytest.raises(UnsafePathError):
            _archive.checked_member(info, "a.tar")


# -- forced replacement: the destination always holds a complete bundle ----------------------
def _watch_dest(monkeypatch, dest):
    """After every rename/replace/rmtree call, record whether ``dest`` holds a bundle."""
    import shutil

    seen = []
    for owner, name in ((os, "rename"), (os, "replace"), (shutil, "rmtree")):
        real = getattr(owner, name)

        def spy(*args, _real=real, **kwargs):
            try:
                return _real(*args, **kwargs)
            finally:
                seen.append(os.path.isfile(os.path.join(str(dest), "f")))
        monkeypatch.setattr(owner, name, spy)
    return seen


def _old_and_new(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "f").write_bytes(b"old")
    st = _staging.Staging(str(dest), force=True)
    (tmp_path / st.path / "f").write_bytes(b"new")
    return dest, st


def test_forced_replacement_never_leaves_the_destination_empty(tmp_path, monkeypatch):
    # Before: dest was renamed aside, then the new bundle renamed in: between the two calls no
    # bundle was at dest (a reader, or a crash, saw nothing).
    (tmp_path / "p1").mkdir()
    (tmp_path / "p2").mkdir()
    if not _staging.exchange_paths(str(tmp_path / "p1"), str(tmp_path / "p2")):
        pytest.skip("this file system has no renameat2(RENAME_EXCHANGE): the documented fallback applies")
    os.rmdir(str(tmp_path / "p1"))
    os.rmdir(str(tmp_path / "p2"))
    dest, st = _old_and_new(tmp_path)
    seen = _watch_dest(monkeypatch, dest)
    st.commit()
    monkeypatch.undo()
    assert (dest / "f").read_bytes() == b"new"
    assert seen and all(seen)
    assert sorted(os.listdir(str(tmp_path))) == ["out"]


def test_exchange_through_the_raw_syscall_when_libc_lacks_renameat2(tmp_path, monkeypatch):
    import ctypes

    real_cdll = ctypes.CDLL

    class NoWrapper(object):
        def __init__(self, *args, **kwargs):
            self._lib = real_cdll(*args, **kwargs)

        def __getattr__(self, name):
            if name == "renameat2":
                raise AttributeError(name)
            return getattr(self._lib, name)

    monkeypatch.setattr(ctypes, "CDLL", NoWrapper)
    call = _staging._load_renameat2()
    monkeypatch.undo()
    if call is None:
        pytest.skip("no renameat2 syscall number for this machine")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"")
    assert call(os.fsencode(str(tmp_path / "a")), os.fsencode(str(tmp_path / "b"))) == 0
    assert os.listdir(str(tmp_path / "b")) == ["x"] and os.listdir(str(tmp_path / "a")) == []


def test_forced_replacement_without_exchange_falls_back_to_two_renames(tmp_path, monkeypatch):
    monkeypatch.setattr(_staging, "exchange_paths", lambda a, b: False)
    dest, st = _old_and_new(tmp_path)
    st.commit()
    assert (dest / "f").read_bytes() == b"new"
    assert sorted(os.listdir(str(tmp_path))) == ["out"]


def test_bundle_left_aside_by_an_interrupted_swap_is_put_back(tmp_path):
    # A process killed between the two renames of the fallback: dest absent, the old bundle
    # complete under .out.old-<dead pid>-...; the next write restores it before anything else.
    dead_pid = 2 ** 22 + 12345
    aside = tmp_path / ".out.old-{}-abc".format(dead_pid)
    aside.mkdir()
    (aside / "f").write_bytes(b"old")
    with pytest.raises(BundleExistsError):
        _staging.Staging(str(tmp_path / "out"))
    assert (tmp_path / "out" / "f").read_bytes() == b"old"
    assert sorted(os.listdir(str(tmp_path))) == ["out"]


@pytest.mark.parametrize("size", [0, 1, _fs._FIRST_READ - 1, _fs._FIRST_READ, _fs._FIRST_READ + 1,
                                  _fs.CHUNK_SIZE + _fs._FIRST_READ, 3 * _fs.CHUNK_SIZE + 7])
@pytest.mark.parametrize("chunk", [_fs.CHUNK_SIZE, 4096])
def test_sha256_file_at_the_first_read_and_chunk_boundaries(tmp_path, size, chunk):
    data = os.urandom(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    assert _fs.sha256_file(str(path), chunk) == (size, hashlib.sha256(data).hexdigest())
