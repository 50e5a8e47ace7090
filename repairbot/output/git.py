"""Commits a verified fix as one commit on a new git branch, leaving the user's checkout alone.

The commit is built with git's plumbing on a temporary index (``GIT_INDEX_FILE`` in a
temporary folder) loaded from HEAD's tree, so the checked-out branch, ``.git/index``, the
working tree, the stash and untracked files are never written. Blobs are hashed with
``hash-object --path=<file>`` so clean filters and eol conversion apply exactly as ``git add``
would apply them, and the branch ref is created with an empty old value so an existing branch
is never overwritten.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import git

from repairbot.sources import deferred_signals
from repairbot.types import BadInput

FALLBACK_NAME = "repairbot"
FALLBACK_EMAIL = "repairbot@localhost"

REGULAR_MODE = "100644"
EXECUTABLE_MODE = "100755"
# The only tree entries whose content is a file's own bytes (not a symlink or a submodule).
FILE_MODES = frozenset({REGULAR_MODE, EXECUTABLE_MODE})

# Every command: paths are literal (a file named `*.py` is no glob), and no read-only command
# refreshes and rewrites the user's index behind our back (as `git status` would).
BASE_ENV = {"GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0"}
# A split index writes its shared part into .git even for a temporary index file.
TEMP_INDEX_OPTIONS = ("core.splitIndex=false",)
# `git var` then fails instead of guessing an identity from the host name.
CONFIGURED_IDENTITY_ONLY = ("user.useConfigOnly=true",)


@dataclass(frozen=True)
class RepoState:
    """The repository holding the user's script, as it was when repairbot started."""

    root: Path  # the work tree's top folder (resolved)
    head: str  # full sha of HEAD
    branch: str | None  # checked-out branch name, None for a detached HEAD


@dataclass(frozen=True)
class TreeEntry:
    """One file's entry in a tree or in the index."""

    mode: str
    sha: str


@dataclass(frozen=True)
class GitResult:
    status: int
    stdout: str
    stderr: str

    @property
    def message(self) -> str:
        """git's own reason in one line: its first fatal or error line, else its last line."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        # Advice (such as how to mark a directory safe) follows the reason, never replaces it.
        reasons = [line for line in lines if line.startswith(("fatal:", "error:"))]
        if reasons:
            return reasons[0]
        return lines[-1] if lines else f"git exited with status {self.status}"

    def failure(self, command: str) -> BadInput:
        return BadInput(f"git {command} failed: {self.message}; fix the repository and rerun")


def open_repo(path: Path) -> RepoState:
    """The repository holding `path` (a file or folder); BadInput where no fix can be committed."""
    start = Path(os.path.abspath(path))
    if not start.is_dir():
        start = start.parent
    if not start.is_dir():
        raise BadInput(f"{path} does not exist; pass the path of an existing script")
    try:
        repo = git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInput(
            f"{path} is not inside a git repository; run with --no-branch or --dry-run"
        ) from None
    with repo:
        if repo.bare or repo.working_tree_dir is None:
            raise BadInput(
                f"{path} is in a bare git repository (no working tree); "
                "run with --no-branch or --dry-run"
            )
        root = Path(repo.working_tree_dir).resolve()
        # Through git itself, so a refusal such as "dubious ownership" shows up here, early;
        # --quiet keeps an unborn HEAD (no commit yet) the only silent failure.
        head = _run(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if head.status != 0 and head.stderr.strip():
            raise head.failure("rev-parse")
        if head.status != 0:
            raise BadInput(
                f"the git repository at {root} has no commit yet; commit your files first "
                "or run with --no-branch"
            )
        branch = None if repo.head.is_detached else repo.active_branch.name
    return RepoState(root=root, head=head.stdout.strip(), branch=branch)


def relative(state: RepoState, path: Path) -> str:
    """`path` relative to the work tree's top folder, posix style; BadInput when outside it."""
    rel = _relative_or_none(state, path)
    if rel is None:
        raise BadInput(f"{path} is outside the git work tree at {state.root}; run with --no-branch")
    return rel


def unclean_files(state: RepoState, paths: Iterable[Path]) -> dict[Path, str]:
    """Those of `paths` under the work tree that are 'untracked', 'ignored' or 'modified'.

    'modified' means the working-tree bytes, after git's clean filters, differ from HEAD's
    blob, or the index holds a change not yet committed. Files outside the work tree, and
    clean files, are left out.
    """
    rel_by_path = {path: rel for path in paths if (rel := _relative_or_none(state, path))}
    if not rel_by_path:
        return {}
    rels = sorted(set(rel_by_path.values()))
    with _open(state) as repo:
        in_head = _tree_entries(repo, state.head, rels)
        in_index = _index_entries(repo, rels)
        unclean: dict[Path, str] = {}
        for path, rel in rel_by_path.items():
            head_entry = in_head.get(rel)
            if head_entry is None and rel not in in_index:
                if os.path.lexists(path):
                    unclean[path] = "ignored" if _is_ignored(repo, rel) else "untracked"
            elif (
                in_index.get(rel) != head_entry  # staged, including a staged add or removal
                or head_entry is None
                or not os.path.lexists(path)
                # A symlink or submodule entry never matches: only regular files get committed.
                or _hash_blob(repo, rel, path, write=False) != head_entry.sha
            ):
                unclean[path] = "modified"
    return unclean


def branch_exists(state: RepoState, name: str) -> bool:
    with _open(state) as repo:
        return _branch_exists(repo, name)


def check_branch_name(state: RepoState, name: str) -> None:
    """BadInput when `name` is no valid branch name or the branch already exists."""
    with _open(state) as repo:
        _check_branch_name(repo, name)


def commit_on_new_branch(
    state: RepoState,
    files: Mapping[Path, bytes],
    message: str,
    branch: str | Callable[[str], str],
) -> tuple[str, str]:
    """Commit `files` on top of HEAD as one commit on a new branch; return (branch, sha).

    `files` maps each absolute path to its exact verified bytes as they should be in the
    working tree. `branch` is a name, or a function from the new commit's sha to the name.
    Nothing the user has checked out, staged, stashed or left untracked is touched.
    """
    if not files:
        raise BadInput("there are no fixed files to commit; run with --no-branch")
    content_by_rel = {relative(state, path): content for path, content in files.items()}
    with _open(state) as repo, tempfile.TemporaryDirectory(prefix="repairbot-git-") as temp:
        if isinstance(branch, str):
            # Refuse before any work; the callable's name is only known after the commit.
            _check_branch_name(repo, branch)
        temp_dir = Path(temp)
        index_env = {"GIT_INDEX_FILE": str(temp_dir / "index")}
        in_head = _tree_entries(repo, state.head, sorted(content_by_rel))
        _git(repo, "read-tree", state.head, env=index_env, options=TEMP_INDEX_OPTIONS)
        cacheinfo: list[str] = []
        for number, (rel, content) in enumerate(sorted(content_by_rel.items())):
            source = temp_dir / f"blob-{number}"
            source.write_bytes(content)
            mode = _mode_for(rel, in_head.get(rel), state.root / rel)
            sha = _hash_blob(repo, rel, source, write=True)
            cacheinfo += ["--cacheinfo", f"{mode},{sha},{rel}"]
        _git(repo, "update-index", "--add", *cacheinfo, env=index_env, options=TEMP_INDEX_OPTIONS)
        tree = _git(repo, "write-tree", env=index_env, options=TEMP_INDEX_OPTIONS)
        if tree == _git(repo, "rev-parse", f"{state.head}^{{tree}}"):
            raise BadInput(
                "the fixed files are identical to HEAD, so there is nothing to commit; "
                "run with --no-branch"
            )
        # From a file, so the message is kept byte for byte (-m would reformat it).
        message_file = temp_dir / "message"
        message_file.write_bytes(message.encode("utf-8"))
        commit = _git(
            repo,
            "commit-tree",
            tree,
            "-p",
            state.head,
            "-F",
            str(message_file),
            env=_fallback_identity_env(repo),
        )
        name = branch if isinstance(branch, str) else branch(commit)
        if not isinstance(branch, str):
            _check_branch_name(repo, name)
        _create_branch(repo, name, commit, state.head)
    return name, commit


@contextmanager
def _open(state: RepoState) -> Iterator[git.Repo]:
    # The with-block kills GitPython's persistent `git cat-file` helpers when done.
    with git.Repo(state.root) as repo:
        yield repo


def _run(
    repo: git.Repo,
    *args: str,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> GitResult:
    """One git command in the work tree's top folder; its exit status is the caller's to judge."""
    executable = repo.git.GIT_PYTHON_GIT_EXECUTABLE or "git"
    config = [part for option in options for part in ("-c", option)]
    # Run to its end even when SIGINT/SIGTERM arrives (acted on right after): git killed
    # halfway may leave a lock file, and a git that repairbot stops waiting for goes on
    # writing (a branch, say) after repairbot has exited.
    with deferred_signals():
        status, stdout, stderr = repo.git.execute(
            [executable, *config, *args],
            with_extended_output=True,
            with_exceptions=False,
            env={**BASE_ENV, **(env or {})},
        )
    return GitResult(status=status, stdout=stdout, stderr=stderr)


def _git(
    repo: git.Repo,
    *args: str,
    env: Mapping[str, str] | None = None,
    options: Sequence[str] = (),
) -> str:
    """The stdout of a git command that must succeed; BadInput with git's reason otherwise."""
    result = _run(repo, *args, env=env, options=options)
    if result.status != 0:
        raise result.failure(args[0])
    return result.stdout.strip()


def _relative_or_none(state: RepoState, path: Path) -> str | None:
    absolute = Path(os.path.abspath(path))
    # Resolve the folder only: a symlinked file is the repository's own entry, not its target.
    located = absolute.parent.resolve() / absolute.name
    try:
        rel = located.relative_to(state.root)
    except ValueError:
        return None
    if not rel.parts or rel.parts[0] == ".git":
        return None
    return rel.as_posix()


def _tree_entries(repo: git.Repo, commit: str, rels: Sequence[str]) -> dict[str, TreeEntry]:
    """The blobs at `rels` in `commit`'s tree (paths that are folders or absent left out)."""
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *rels)
    entries: dict[str, TreeEntry] = {}
    for record in filter(None, listing.split("\0")):
        meta, rel = record.split("\t", 1)
        mode, _kind, sha = meta.split()
        entries[rel] = TreeEntry(mode=mode, sha=sha)
    return entries


def _index_entries(repo: git.Repo, rels: Sequence[str]) -> dict[str, TreeEntry]:
    """The user's index entries at `rels`; an unresolved conflict gets an entry matching none."""
    listing = _git(repo, "ls-files", "--stage", "-z", "--full-name", "--", *rels)
    entries: dict[str, TreeEntry] = {}
    for record in filter(None, listing.split("\0")):
        meta, rel = record.split("\t", 1)
        mode, sha, stage = meta.split()
        entries[rel] = TreeEntry(mode=mode, sha=sha) if stage == "0" else TreeEntry("", "")
    return entries


def _is_ignored(repo: git.Repo, rel: str) -> bool:
    # The exit status only: check-ignore's output quotes unusual names unless read from stdin.
    # It takes plain path names, and refuses to run at all under literal-pathspec mode.
    result = _run(repo, "check-ignore", "--quiet", "--", rel, env={"GIT_LITERAL_PATHSPECS": "0"})
    if result.status not in (0, 1):  # 1: not ignored
        raise result.failure("check-ignore")
    return result.status == 0


def _hash_blob(repo: git.Repo, rel: str, source: Path, *, write: bool) -> str:
    """The blob id `git add` would give `source`'s bytes at `rel` (clean filters, eol)."""
    write_flag = ["-w"] if write else []
    return _git(repo, "hash-object", *write_flag, f"--path={rel}", "--", str(source))


def _mode_for(rel: str, head_entry: TreeEntry | None, working_file: Path) -> str:
    """HEAD's mode for a file it has; for a new file, the working file's executable bit."""
    if head_entry is None:
        executable = working_file.is_file() and os.access(working_file, os.X_OK)
        return EXECUTABLE_MODE if executable else REGULAR_MODE
    if head_entry.mode not in FILE_MODES:
        raise BadInput(
            f"{rel} is a symlink or submodule in HEAD, not a regular file; run with --no-branch"
        )
    return head_entry.mode


def _fallback_identity_env(repo: git.Repo) -> dict[str, str]:
    """repairbot's identity for each role git has no configured identity for (config untouched)."""
    env: dict[str, str] = {}
    for role in ("AUTHOR", "COMMITTER"):
        if _run(repo, "var", f"GIT_{role}_IDENT", options=CONFIGURED_IDENTITY_ONLY).status != 0:
            env |= {f"GIT_{role}_NAME": FALLBACK_NAME, f"GIT_{role}_EMAIL": FALLBACK_EMAIL}
    return env


def _branch_exists(repo: git.Repo, name: str) -> bool:
    return _run(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{name}").status == 0


def _check_branch_name(repo: git.Repo, name: str) -> None:
    checked = _run(repo, "check-ref-format", "--branch", name)
    # --branch expands `@{-1}` to an older branch's name: only a name kept as given is valid.
    if checked.status != 0 or checked.stdout.strip() != name or name == "HEAD":
        raise BadInput(f"{name!r} is not a valid git branch name; choose another name")
    if _branch_exists(repo, name):
        raise _branch_taken(name)


def _create_branch(repo: git.Repo, name: str, commit: str, start: str) -> None:
    # The empty old value makes the update fail if the ref exists, even if it appeared just now.
    created = _run(
        repo,
        "update-ref",
        "-m",
        f"repairbot: created from {start}",
        f"refs/heads/{name}",
        commit,
        "",
    )
    if created.status == 0:
        return
    if _branch_exists(repo, name):
        raise _branch_taken(name)
    raise BadInput(f"could not create branch {name!r}: {created.message}; choose another name")


def _branch_taken(name: str) -> BadInput:
    return BadInput(f"branch {name!r} already exists; choose another name or delete that branch")


FIX_BRANCHES = "refs/heads/repairbot/fix-*"


@dataclass(frozen=True)
class FixCommit:
    """The commit at the tip of a fix branch, read back (the editor's hover)."""

    branch: str
    sha: str
    message: str
    diff: str  # `git show`'s patch, git's extended headers included
    # each notebook the commit changes: (path, its text before, after); its diff is of JSON lines
    notebooks: tuple[tuple[str, str, str], ...] = ()


def fix_commits(folder: Path, pattern: str = FIX_BRANCHES) -> tuple[Path, list[FixCommit]]:
    """The repository's top folder and the tip commits of its fix branches; ``(folder, [])``
    outside a repository or where git cannot read it (nothing to show is no error here)."""
    try:
        repo = git.Repo(folder, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return folder, []
    with repo:
        if repo.working_tree_dir is None:
            return folder, []
        root = Path(repo.working_tree_dir).resolve()
        refs = _run(repo, "for-each-ref", "--format=%(refname:short)%00%(objectname)", pattern)
        found = []
        for line in refs.stdout.splitlines() if refs.status == 0 else ():
            branch, _, sha = line.partition("\0")
            shown = _run(repo, "show", "--no-color", "--no-ext-diff", "--format=%B%x00", sha)
            if shown.status == 0 and "\0" in shown.stdout:
                message, _, diff = shown.stdout.partition("\0")
                notebooks = _changed_notebooks(repo, sha) if ".ipynb" in diff else ()
                found.append(FixCommit(branch, sha, message, diff.lstrip("\n"), notebooks))
    return root, found


def _changed_notebooks(repo: git.Repo, sha: str) -> tuple[tuple[str, str, str], ...]:
    """The notebooks a commit changes, with their text before and after it (a notebook added
    by the commit has none before)."""
    names = _run(repo, "diff-tree", "-r", "-z", "--no-commit-id", "--name-only", f"{sha}^", sha)
    found = []
    for name in names.stdout.split("\0") if names.status == 0 else ():
        if name.endswith(".ipynb"):
            before = _run(repo, "cat-file", "blob", f"{sha}^:{name}")
            after = _run(repo, "cat-file", "blob", f"{sha}:{name}")
            if after.status == 0:
                found.append((name, before.stdout if before.status == 0 else "", after.stdout))
    return tuple(found)


def refs_state(folder: Path) -> tuple[Path, tuple[object, ...]] | None:
    """The top folder of the work tree that holds ``folder``, and a value that changes whenever
    one of its fix branches is created, moved or deleted: the stats of the files git keeps
    those refs in (the loose refs under ``refs/heads/repairbot/``, ``packed-refs``, a reftable's
    table list). Read from the files alone, no git run: cheap enough for every hover. None
    outside a repository (found as git finds it by default: the nearest ``.git`` above)."""
    start = Path(os.path.abspath(folder))
    top = next((candidate for candidate in (start, *start.parents) if (candidate / ".git").exists()), None)
    if top is None:
        return None
    git_dir = top / ".git"
    if git_dir.is_file():  # a linked worktree or a submodule: `gitdir: PATH`
        try:
            pointer = git_dir.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        git_dir = top / pointer.removeprefix("gitdir:").strip()
    common = git_dir
    with contextlib.suppress(OSError, UnicodeDecodeError):  # a linked worktree's branches are its main repository's
        common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
    loose: list[tuple[str, tuple[int, int, int] | None]] = []
    branches = common / "refs" / "heads" / "repairbot"
    for base, _, files in os.walk(branches):
        loose.extend((os.path.join(base, name), _stat(Path(base, name))) for name in files)
    return top, (_stat(common / "packed-refs"), _stat(common / "reftable" / "tables.list"), tuple(sorted(loose)))


def _stat(path: Path) -> tuple[int, int, int] | None:
    """What changes when git writes a file (always a new file renamed over the old one)."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino
