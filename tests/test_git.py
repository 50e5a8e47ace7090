"""Tests for repairbot.output.git: a fix committed on a new branch, the user's checkout untouched.

Every test builds its own repository under tmp_path and runs git with a private, empty
global configuration, so neither the machine's git config nor a parallel test can interfere.
Expectations are read back with the git command line, independently of the code under test.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from repairbot.output import git as git_output
from repairbot.output.git import (
    FALLBACK_EMAIL,
    FALLBACK_NAME,
    RepoState,
    branch_exists,
    check_branch_name,
    commit_on_new_branch,
    open_repo,
    relative,
    unclean_files,
)
from repairbot.types import BadInput

USER_NAME = "Ada Tester"
USER_EMAIL = "ada@example.test"
MESSAGE = (
    "Fix the dtype mismatch in train.py\n"
    "\n"
    "The loss got float64 targets; cast them to float32.\n"
    "  Indented line, kept as is.\n"
    "\n"
    "Repairbot-Pattern: x\n"
    "Repairbot-Attempts: 1\n"
)
FIXED = b"import torch\nprint('fixed')\n"

# Variables through which the environment running the tests could leak into git.
GIT_ENV_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
)


@pytest.fixture(autouse=True)
def private_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty home and no system config: no identity unless a test configures one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in GIT_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder tempfile uses, private to the test so leftovers can be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def git(repo: Path, *args: str) -> str:
    return git_bytes(repo, *args).decode().strip()


def git_bytes(repo: Path, *args: str) -> bytes:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.decode()}"
    return done.stdout


def write(path: Path, content: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def make_repo(root: Path, *, identity: bool = True) -> Path:
    """A repository with one commit: a script, a module in a subfolder, an executable, .gitignore."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    # The seed commit needs an identity; it is removed again where a test wants none.
    git(root, "config", "user.name", USER_NAME)
    git(root, "config", "user.email", USER_EMAIL)
    write(root / "train.py", b"import torch\nprint('broken')\n")
    write(root / "pkg" / "model.py", b"class Model:\n    pass\n")
    write(root / "run.sh", b"#!/bin/sh\npython train.py\n").chmod(0o755)
    write(root / "notes.txt", b"notes\n")
    write(root / ".gitignore", b"*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    if not identity:
        git(root, "config", "--unset", "user.name")
        git(root, "config", "--unset", "user.email")
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def blob(repo: Path, commit: str, rel: str) -> bytes:
    return git_bytes(repo, "cat-file", "blob", f"{commit}:{rel}")


def commit_message(repo: Path, commit: str) -> str:
    raw = git_bytes(repo, "cat-file", "commit", commit).decode()
    return raw.split("\n\n", 1)[1]


def changed_paths(repo: Path, old: str, new: str) -> set[str]:
    return set(git(repo, "diff-tree", "-r", "--name-only", "--no-commit-id", old, new).split())


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def git_children() -> set[int]:
    return {
        child.pid for child in psutil.Process().children(recursive=True) if "git" in child.name()
    }


# --- the commit -------------------------------------------------------------------------


def test_commit_is_one_commit_on_top_of_head_with_exactly_the_given_bytes(repo: Path) -> None:
    state = open_repo(repo / "train.py")
    module = b"class Model:\n    fixed = True\n"
    name, sha = commit_on_new_branch(
        state, {repo / "train.py": FIXED, repo / "pkg" / "model.py": module}, MESSAGE, "fix-1"
    )
    assert name == "fix-1"
    assert git(repo, "rev-parse", "refs/heads/fix-1") == sha
    assert git(repo, "rev-parse", f"{sha}^@") == state.head  # one parent: HEAD
    assert changed_paths(repo, state.head, sha) == {"train.py", "pkg/model.py"}
    assert blob(repo, sha, "train.py") == FIXED
    assert blob(repo, sha, "pkg/model.py") == module


def test_commit_message_is_kept_verbatim(repo: Path) -> None:
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    assert commit_message(repo, sha) == MESSAGE
    trailers = git(repo, "log", "-1", "--format=%(trailers:key=Repairbot-Pattern)", sha)
    assert trailers == "Repairbot-Pattern: x"


def test_commit_message_without_final_newline_is_kept_verbatim(repo: Path) -> None:
    message = "Fix train.py\n\nRepairbot-Pattern: x"
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, message, "fix")
    assert commit_message(repo, sha) == message


def test_new_file_in_a_new_subfolder(repo: Path) -> None:
    state = open_repo(repo)
    new_file = repo / "deep" / "er" / "helper.py"
    _, sha = commit_on_new_branch(state, {new_file: b"x = 1\n"}, MESSAGE, "fix")
    assert blob(repo, sha, "deep/er/helper.py") == b"x = 1\n"
    assert git(repo, "ls-tree", sha, "deep/er/helper.py").split()[0] == "100644"
    assert not new_file.exists()  # the working tree is not where the commit comes from


def test_executable_bit_is_kept(repo: Path) -> None:
    state = open_repo(repo)
    script = b"#!/bin/sh\npython train.py --fixed\n"
    _, sha = commit_on_new_branch(state, {repo / "run.sh": script}, MESSAGE, "fix")
    assert git(repo, "ls-tree", sha, "run.sh").split()[0] == "100755"
    assert git(repo, "ls-tree", sha, "train.py").split()[0] == "100644"


def test_detached_head_branches_from_the_detached_commit(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    write(repo / "notes.txt", b"second\n")
    git(repo, "commit", "-q", "-am", "second")
    git(repo, "checkout", "-q", "--detach", first)
    state = open_repo(repo)
    assert state.branch is None
    assert state.head == first
    _, sha = commit_on_new_branch(state, {repo / "train.py": FIXED}, MESSAGE, "fix")
    assert git(repo, "rev-parse", f"{sha}^") == first
    assert git(repo, "rev-parse", "HEAD") == first
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # still detached


def test_branch_name_from_a_callable_gets_the_commit_sha(repo: Path) -> None:
    seen: list[str] = []

    def name_for(sha: str) -> str:
        seen.append(sha)
        return f"repairbot/fix-train-{sha[:8]}"

    name, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, name_for)
    assert seen == [sha]
    assert len(sha) == 40
    assert name == f"repairbot/fix-train-{sha[:8]}"
    assert git(repo, "rev-parse", f"refs/heads/{name}") == sha


@pytest.mark.parametrize("callable_name", [False, True], ids=["name", "callable"])
def test_existing_branch_is_refused_and_no_ref_changes(repo: Path, callable_name: bool) -> None:
    git(repo, "branch", "taken")
    before = refs(repo)
    state = open_repo(repo)
    branch: str | Callable[[str], str] = (lambda _sha: "taken") if callable_name else "taken"
    with pytest.raises(BadInput, match="already exists"):
        commit_on_new_branch(state, {repo / "train.py": FIXED}, MESSAGE, branch)
    assert refs(repo) == before


def test_branch_created_meanwhile_is_never_overwritten(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ref is created only if absent, even when the early check passed (a race)."""
    monkeypatch.setattr(git_output, "_check_branch_name", lambda _repo, _name: None)
    git(repo, "branch", "taken")
    before = refs(repo)
    with pytest.raises(BadInput, match="already exists"):
        commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "taken")
    assert refs(repo) == before


@pytest.mark.parametrize(
    "name", ["", "has space", "double..dot", "-leading-dash", "ends.lock", "HEAD", "@{-1}", "a~1"]
)
def test_invalid_branch_name_is_refused(repo: Path, name: str) -> None:
    git(repo, "checkout", "-q", "-b", "other")  # so that @{-1} would expand to "main"
    before = refs(repo)
    state = open_repo(repo)
    with pytest.raises(BadInput, match="not a valid git branch name"):
        check_branch_name(state, name)
    with pytest.raises(BadInput, match="not a valid git branch name"):
        commit_on_new_branch(state, {repo / "train.py": FIXED}, MESSAGE, name)
    assert refs(repo) == before


def test_branch_exists_and_check_branch_name(repo: Path) -> None:
    state = open_repo(repo)
    assert branch_exists(state, "main")
    assert not branch_exists(state, "repairbot/fix-train-0123abcd")
    check_branch_name(state, "repairbot/fix-train-0123abcd")
    with pytest.raises(BadInput, match="already exists"):
        check_branch_name(state, "main")


def test_file_outside_the_work_tree_is_refused(repo: Path, tmp_path: Path) -> None:
    state = open_repo(repo)
    before = refs(repo)
    with pytest.raises(BadInput, match="outside the git work tree"):
        commit_on_new_branch(state, {tmp_path / "elsewhere.py": FIXED}, MESSAGE, "fix")
    with pytest.raises(BadInput, match="outside the git work tree"):
        commit_on_new_branch(state, {repo / ".git" / "config": b"x"}, MESSAGE, "fix")
    assert refs(repo) == before


def test_unchanged_files_are_refused(repo: Path) -> None:
    state = open_repo(repo)
    with pytest.raises(BadInput, match="nothing to commit"):
        commit_on_new_branch(
            state, {repo / "train.py": (repo / "train.py").read_bytes()}, MESSAGE, "fix"
        )
    assert not branch_exists(state, "fix")


def test_relative_is_posix_from_the_root(repo: Path, tmp_path: Path) -> None:
    state = open_repo(repo)
    assert relative(state, repo / "pkg" / "model.py") == "pkg/model.py"
    assert relative(state, repo / "pkg" / ".." / "train.py") == "train.py"
    with pytest.raises(BadInput):
        relative(state, tmp_path / "elsewhere.py")


# --- line endings ---------------------------------------------------------------------------


def stored_by_git_add(repo: Path, rel: str, content: bytes) -> str:
    """The blob id `git add` gives these bytes at `rel` (changes the test repo's index)."""
    write(repo / rel, content)
    git(repo, "add", rel)
    return git(repo, "ls-files", "--stage", rel).split()[1]


@pytest.mark.parametrize(
    ("setup", "stored"),
    [
        ({"core.autocrlf": "true"}, b"a = 1\nb = 2\n"),
        ({}, b"a = 1\r\nb = 2\r\n"),
        ({"core.autocrlf": "false"}, b"a = 1\r\nb = 2\r\n"),
    ],
    ids=["autocrlf", "default", "autocrlf-false"],
)
def test_crlf_bytes_are_stored_as_git_add_would(
    repo: Path, setup: dict[str, str], stored: bytes
) -> None:
    for key, value in setup.items():
        git(repo, "config", key, value)
    state = open_repo(repo)
    crlf = b"a = 1\r\nb = 2\r\n"
    _, sha = commit_on_new_branch(state, {repo / "train.py": crlf}, MESSAGE, "fix")
    assert blob(repo, sha, "train.py") == stored
    assert git(repo, "rev-parse", f"{sha}:train.py") == stored_by_git_add(repo, "train.py", crlf)


def test_gitattributes_eol_conversion_applies(repo: Path) -> None:
    write(repo / ".gitattributes", b"*.py text eol=crlf\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": b"x\r\n"}, MESSAGE, "fix")
    assert blob(repo, sha, "train.py") == b"x\n"


# --- the user's state is untouched ----------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """Everything of the user's checkout the commit must leave alone."""

    branch: str
    head: str
    index: bytes
    files: dict[str, tuple[bytes, int, int]]  # rel -> (bytes, mtime_ns, mode)
    stash: str
    staged: str


def snapshot(repo: Path) -> Snapshot:
    files = {}
    for path in sorted(repo.rglob("*")):
        if ".git" in path.relative_to(repo).parts or not path.is_file():
            continue
        info = path.stat()
        files[path.relative_to(repo).as_posix()] = (
            path.read_bytes(),
            info.st_mtime_ns,
            info.st_mode,
        )
    return Snapshot(
        branch=git(repo, "symbolic-ref", "HEAD"),
        head=git(repo, "rev-parse", "HEAD"),
        index=(repo / ".git" / "index").read_bytes(),
        files=files,
        stash=git(repo, "stash", "list", "--format=%H %gs"),
        staged=git(repo, "diff", "--cached", "--name-status"),
    )


@dataclass(frozen=True)
class BusyRepo:
    repo: Path
    before: Snapshot
    after: Snapshot
    commit: str


@pytest.fixture
def busy(repo: Path) -> BusyRepo:
    """A repository with a stash, untracked, ignored and staged files, then a fix committed."""
    write(repo / "notes.txt", b"stashed edit\n")
    git(repo, "stash", "push", "-q", "-m", "work in progress")
    write(repo / "untracked.py", b"scratch = True\n")
    write(repo / "debug.log", b"ignored output\n")
    write(repo / "pkg" / "model.py", b"class Model:\n    staged = True\n")
    git(repo, "add", "pkg/model.py")
    write(repo / "train.py", b"import torch\nprint('unsaved edit')\n")  # modified, not staged
    before = snapshot(repo)
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    return BusyRepo(repo=repo, before=before, after=snapshot(repo), commit=sha)


def test_checked_out_branch_and_head_are_untouched(busy: BusyRepo) -> None:
    assert busy.after.branch == busy.before.branch == "refs/heads/main"
    assert busy.after.head == busy.before.head


def test_index_file_is_byte_identical(busy: BusyRepo) -> None:
    assert busy.after.index == busy.before.index


def test_working_tree_bytes_and_mtimes_are_identical(busy: BusyRepo) -> None:
    assert busy.after.files == busy.before.files


def test_stash_is_untouched(busy: BusyRepo) -> None:
    assert busy.after.stash == busy.before.stash
    assert "work in progress" in busy.after.stash


def test_untracked_and_ignored_files_are_still_there(busy: BusyRepo) -> None:
    assert (busy.repo / "untracked.py").read_bytes() == b"scratch = True\n"
    assert (busy.repo / "debug.log").read_bytes() == b"ignored output\n"
    assert busy.after.files["untracked.py"] == busy.before.files["untracked.py"]
    assert busy.after.files["debug.log"] == busy.before.files["debug.log"]


def test_staged_change_in_another_file_stays_staged_and_out_of_the_commit(busy: BusyRepo) -> None:
    assert busy.after.staged == busy.before.staged == "M\tpkg/model.py"
    assert changed_paths(busy.repo, busy.before.head, busy.commit) == {"train.py"}
    assert blob(busy.repo, busy.commit, "pkg/model.py") == b"class Model:\n    pass\n"


def test_no_temporary_files_are_left(repo: Path, private_tempdir: Path) -> None:
    commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    assert list(private_tempdir.iterdir()) == []
    assert not list((repo / ".git").glob("*.lock"))
    assert not list((repo / ".git").glob("sharedindex*"))


def test_no_git_processes_are_leaked(repo: Path) -> None:
    before = git_children()
    state = open_repo(repo / "train.py")
    unclean_files(state, [repo / "train.py", repo / "pkg" / "model.py"])
    check_branch_name(state, "fix")
    commit_on_new_branch(state, {repo / "train.py": FIXED}, MESSAGE, "fix")
    assert git_children() == before


# --- identity -------------------------------------------------------------------------------


def author_and_committer(repo: Path, sha: str) -> str:
    return git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha)


def test_configured_identity_is_used(repo: Path) -> None:
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    expected = f"{USER_NAME} <{USER_EMAIL}>"
    assert author_and_committer(repo, sha) == f"{expected}|{expected}"


def test_global_identity_is_used(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", identity=False)
    home_config = Path(os.environ["HOME"]) / ".gitconfig"
    home_config.write_text("[user]\n\tname = Global User\n\temail = global@example.test\n")
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    expected = "Global User <global@example.test>"
    assert author_and_committer(repo, sha) == f"{expected}|{expected}"


def test_without_identity_the_fallback_is_used_and_no_config_written(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", identity=False)
    config = (repo / ".git" / "config").read_bytes()
    _, sha = commit_on_new_branch(open_repo(repo), {repo / "train.py": FIXED}, MESSAGE, "fix")
    fallback = f"{FALLBACK_NAME} <{FALLBACK_EMAIL}>"
    assert author_and_committer(repo, sha) == f"{fallback}|{fallback}"
    assert (repo / ".git" / "config").read_bytes() == config
    assert not (Path(os.environ["HOME"]) / ".gitconfig").exists()


# --- open_repo ------------------------------------------------------------------------------


def test_open_repo_from_a_file_in_a_subfolder(repo: Path) -> None:
    state = open_repo(repo / "pkg" / "model.py")
    assert state == RepoState(
        root=repo.resolve(), head=git(repo, "rev-parse", "HEAD"), branch="main"
    )


def test_open_repo_refuses_a_plain_folder(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    write(folder / "train.py", FIXED)
    with pytest.raises(BadInput, match=r"not inside a git repository.*--no-branch"):
        open_repo(folder / "train.py")


def test_open_repo_refuses_a_bare_repository(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    bare.mkdir()
    git(bare, "init", "-q", "--bare")
    with pytest.raises(BadInput, match="bare git repository"):
        open_repo(bare)


def test_open_repo_refuses_an_unborn_branch(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    write(root / "train.py", FIXED)
    git(root, "init", "-q")
    with pytest.raises(BadInput, match=r"no commit yet.*commit"):
        open_repo(root / "train.py")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository away")
def test_open_repo_passes_on_gits_own_refusal(repo: Path) -> None:
    """A repository git itself refuses (another owner) is reported with git's reason."""
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 54321, 54321)
    with pytest.raises(BadInput, match="dubious ownership"):
        open_repo(repo)


def test_open_repo_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="does not exist"):
        open_repo(tmp_path / "nowhere" / "train.py")


# --- unclean_files --------------------------------------------------------------------------


def test_unclean_files_reports_each_kind(repo: Path, tmp_path: Path) -> None:
    write(repo / "untracked.py", b"x\n")
    write(repo / "debug.log", b"log\n")
    write(repo / "train.py", b"edited\n")  # modified in the working tree
    write(repo / "pkg" / "model.py", b"staged\n")
    git(repo, "add", "pkg/model.py")
    write(repo / "pkg" / "added.py", b"new and staged\n")
    git(repo, "add", "pkg/added.py")
    outside = write(tmp_path / "outside.py", b"x\n")
    paths = [
        repo / "untracked.py",
        repo / "debug.log",
        repo / "train.py",
        repo / "pkg" / "model.py",
        repo / "pkg" / "added.py",
        repo / "notes.txt",  # clean
        repo / "run.sh",  # clean, executable
        outside,
    ]
    assert unclean_files(open_repo(repo), paths) == {
        repo / "untracked.py": "untracked",
        repo / "debug.log": "ignored",
        repo / "train.py": "modified",
        repo / "pkg" / "model.py": "modified",
        repo / "pkg" / "added.py": "modified",
    }


def test_staged_change_reverted_in_the_working_tree_is_still_modified(repo: Path) -> None:
    original = (repo / "train.py").read_bytes()
    write(repo / "train.py", b"staged\n")
    git(repo, "add", "train.py")
    write(repo / "train.py", original)
    assert unclean_files(open_repo(repo), [repo / "train.py"]) == {repo / "train.py": "modified"}


def test_unclean_files_is_empty_for_a_clean_checkout(repo: Path) -> None:
    state = open_repo(repo)
    assert unclean_files(state, [repo / "train.py", repo / "pkg" / "model.py"]) == {}
    assert unclean_files(state, []) == {}


def test_crlf_working_file_under_autocrlf_is_not_modified(repo: Path) -> None:
    git(repo, "config", "core.autocrlf", "true")
    write(repo / "train.py", (repo / "train.py").read_bytes().replace(b"\n", b"\r\n"))
    state = open_repo(repo)
    assert unclean_files(state, [repo / "train.py"]) == {}
    git(repo, "config", "core.autocrlf", "false")
    assert unclean_files(state, [repo / "train.py"]) == {repo / "train.py": "modified"}


def test_unclean_files_does_not_touch_the_index(repo: Path) -> None:
    write(repo / "train.py", b"edited\n")
    index = (repo / ".git" / "index").read_bytes()
    unclean_files(open_repo(repo), [repo / "train.py", repo / "notes.txt"])
    assert (repo / ".git" / "index").read_bytes() == index


def test_paths_are_literal_not_globs(repo: Path) -> None:
    """A file named like a glob that matches tracked files is only itself."""
    glob_named_file = write(repo / "*.py", b"star\n")
    state = open_repo(repo)
    assert unclean_files(state, [glob_named_file]) == {glob_named_file: "untracked"}
    _, sha = commit_on_new_branch(state, {glob_named_file: b"star fixed\n"}, MESSAGE, "fix")
    assert changed_paths(repo, state.head, sha) == {"*.py"}
