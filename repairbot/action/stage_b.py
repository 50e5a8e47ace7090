"""Stage B of the GitHub Action: a ``workflow_run`` job that proposes Stage A's patch.

It holds a write token, so it treats the artifact as untrusted data and never runs any of the
code it checks out:

``prepare``: checks the artifact (only the expected regular files, size limits, a
``repairbot.report/1`` report with status ``fixed`` whose diff is the patch), checks the patch
(a plain unified diff whose every file is a tracked regular file under the repository, no
``.github/`` file, no ``.git`` path, no symlink on the way, no creation, deletion, rename or
mode change), checks that the checkout is the failed run's commit, then ``git apply --check``,
``git apply`` and one commit on a new local ``repairbot/fix-<sha>`` branch (hooks off).

``publish``: pushes that branch (the token comes from ``REPAIRBOT_TOKEN`` and is handed to git
through the environment, never written to a config file or a command line) and opens a pull
request whose body is the Markdown report; a branch that already exists is left alone.

``comment``: for a run from a fork (only where the workflow allows forks), posts the report as a
comment on the pull request instead: nothing is pushed.

Standard library, git and the ``gh`` CLI only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path, as the workflow does
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from repairbot.action.github import annotation, set_outputs
from repairbot.output.diff import FilePatch, PatchError, parse_patch
from repairbot.output.report import SCHEMA

# What Stage A uploads, and the most each file may weigh.
ARTIFACT_FILES = {"report.json": 8 << 20, "report.md": 1 << 20, "report.sarif": 8 << 20, "fix.patch": 1 << 20}
REQUIRED_FILES = ("report.json", "report.md", "fix.patch")
MAX_FILES = 20  # files one patch may change
PR_BODY_LIMIT = 60_000  # GitHub refuses a pull request body over 65,536 characters
BRANCH_PREFIX = "repairbot/fix-"
_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
_PATTERN_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# Path characters a patch may use: no quoting, control characters, backslashes or globs.
_PATH = re.compile(r"^[A-Za-z0-9_.+@=,-]+(?:/[A-Za-z0-9_.+@=,-]+)*$")
_BOT_NAME = "github-actions[bot]"
_BOT_EMAIL = "41898282+github-actions[bot]@users.noreply.github.com"
# git never runs a hook or an fsmonitor of the checkout: the checkout is untrusted data
_GIT_HARDENING = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "commit.gpgsign=false")


class Refused(Exception):
    """The artifact or the patch fails a check: nothing is applied, pushed or posted."""


# --------------------------------------------------------------------------------------------
# The artifact
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    report: dict[str, Any]
    markdown: str
    patch: str
    files: tuple[str, ...]
    patterns: tuple[str, ...]


def _read(folder: Path, name: str) -> str:
    path = folder / name
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"artifact: {name} is not a regular file")
    if info.st_size > ARTIFACT_FILES[name]:
        raise Refused(f"artifact: {name} is larger than {ARTIFACT_FILES[name]} bytes")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"artifact: {name} is not UTF-8 text") from None


def read_artifact(folder: Path) -> Artifact:
    """The artifact's report, Markdown and patch, checked as untrusted data."""
    if folder.is_symlink() or not folder.is_dir():
        raise Refused(f"artifact: {folder} is not a folder")
    names = sorted(entry.name for entry in folder.iterdir())
    unexpected = [name for name in names if name not in ARTIFACT_FILES]
    if unexpected:
        raise Refused(f"artifact: unexpected entries {unexpected}")
    missing = [name for name in REQUIRED_FILES if name not in names]
    if missing:
        raise Refused(f"artifact: missing {missing} (no fix to propose)")
    try:
        report = json.loads(_read(folder, "report.json"))
    except json.JSONDecodeError as error:
        raise Refused(f"artifact: report.json is not JSON: {error}") from None
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise Refused(f"artifact: report.json is not a {SCHEMA} report")
    if report.get("status") != "fixed":
        raise Refused(f"artifact: the report's status is {report.get('status')!r}, not 'fixed'")
    patch = _read(folder, "fix.patch")
    if patch != report.get("diff"):
        raise Refused("artifact: fix.patch is not the report's diff")
    files = report.get("files_modified")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise Refused("artifact: the report names no modified files")
    patterns = []
    for attempt in report.get("attempts") or []:
        fix = attempt.get("fix") if isinstance(attempt, dict) else None
        pattern = fix.get("pattern") if isinstance(fix, dict) else None
        if isinstance(pattern, str) and _PATTERN_ID.match(pattern) and pattern not in patterns:
            patterns.append(pattern)
    return Artifact(report, _read(folder, "report.md"), patch, tuple(files), tuple(patterns))


# --------------------------------------------------------------------------------------------
# The patch
# --------------------------------------------------------------------------------------------


def check_path(path: str) -> None:
    """A path a patch may touch: relative, plain, inside the repository, not git's or the workflows'."""
    if not _PATH.match(path):
        raise Refused(f"patch: {path!r} is not a plain relative path")
    parts = path.split("/")
    if any(part in (".", "..") for part in parts):
        raise Refused(f"patch: {path!r} leaves its folder")
    if any(part.lower() == ".git" for part in parts):
        raise Refused(f"patch: {path!r} is inside .git")
    if parts[0].lower() == ".github":
        raise Refused(f"patch: {path!r} is under .github/ (workflows and actions are never changed)")


def check_patch(artifact: Artifact) -> list[FilePatch]:
    """The patch's files, each one checked; it must change exactly the report's files."""
    try:
        patches = parse_patch(artifact.patch)
    except PatchError as error:
        raise Refused(f"patch: {error}") from None
    if not patches:
        raise Refused("patch: it changes nothing")
    if len(patches) > MAX_FILES:
        raise Refused(f"patch: it changes {len(patches)} files (at most {MAX_FILES})")
    seen: list[str] = []
    for patch in patches:
        if patch.old_path != patch.new_path:
            raise Refused(f"patch: {patch.old_path!r} -> {patch.new_path!r} creates, deletes or renames a file")
        check_path(patch.path)
        if patch.path in seen:
            raise Refused(f"patch: {patch.path!r} appears twice")
        seen.append(patch.path)
    if sorted(seen) != sorted(artifact.files):
        raise Refused(f"patch: it changes {sorted(seen)}, the report says {sorted(artifact.files)}")
    return patches


# --------------------------------------------------------------------------------------------
# git
# --------------------------------------------------------------------------------------------


def git(repo: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    result = subprocess.run(
        ["git", *_GIT_HARDENING, *args], cwd=repo, capture_output=True, text=True, env=environment, check=False,
    )
    if check and result.returncode != 0:
        raise Refused(f"git {args[0]}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def check_checkout(repo: Path, sha: str, patches: Sequence[FilePatch]) -> None:
    """The checkout is the failed run's commit, clean, and every patched path is a tracked
    regular file reached through real folders (a symlink could lead outside the repository)."""
    if not _SHA.match(sha):
        raise Refused(f"{sha!r} is not a commit sha")
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    if head != sha:
        raise Refused(f"the checkout is at {head}, not at the failed run's commit {sha}")
    if git(repo, "status", "--porcelain=v1", "--untracked-files=no").stdout.strip():
        raise Refused("the checkout has local changes")
    root = repo.resolve()
    for patch in patches:
        entries = git(repo, "ls-files", "-s", "-z", "--", patch.path).stdout.strip("\0").split("\0")
        if entries == [""]:
            raise Refused(f"patch: {patch.path} is not a tracked file")
        mode = entries[0].split(" ", 1)[0]
        if len(entries) != 1 or mode not in ("100644", "100755"):
            raise Refused(f"patch: {patch.path} is not a regular file in git (mode {mode})")
        current = root
        for part in patch.path.split("/"):
            current = current / part
            if current.is_symlink():
                raise Refused(f"patch: {patch.path} goes through the symlink {current.relative_to(root)}")
        if not current.is_file() or not current.resolve().is_relative_to(root):
            raise Refused(f"patch: {patch.path} is not a file inside the repository")


def branch_name(sha: str) -> str:
    return f"{BRANCH_PREFIX}{sha[:12]}"


def _title(artifact: Artifact) -> str:
    patterns = ", ".join(artifact.patterns) or "a crash"
    return f"repairbot: fix {patterns} in {', '.join(artifact.files)}"


def apply_and_commit(repo: Path, artifact: Artifact, sha: str, run_url: str | None) -> str:
    """Apply the checked patch and commit it on a new local branch; the branch's name."""
    patch_file = repo / ".git" / "repairbot.patch"
    patch_file.write_text(artifact.patch, encoding="utf-8")
    try:
        git(repo, "apply", "--check", str(patch_file))
        git(repo, "apply", str(patch_file))
    finally:
        patch_file.unlink(missing_ok=True)
    changed = sorted(git(repo, "diff", "--name-only", "-z").stdout.strip("\0").split("\0"))
    if changed != sorted(artifact.files):
        raise Refused(f"git apply changed {changed}, expected {sorted(artifact.files)}")
    branch = branch_name(sha)
    git(repo, "check-ref-format", "--branch", branch)
    git(repo, "switch", "--quiet", "-c", branch)
    git(repo, "add", "--", *artifact.files)
    origin = f"the failed run {run_url}" if run_url else "a failed run"
    message = (
        f"{_title(artifact)}\n\nProposed by repairbot for {origin} at {sha}: the fix was verified by "
        f"rerunning the script in that run's job.\n\n"
        + "".join(f"Repairbot-Pattern: {p}\n" for p in artifact.patterns)
    )
    identity = {
        "GIT_AUTHOR_NAME": os.environ.get("REPAIRBOT_GIT_NAME", _BOT_NAME),
        "GIT_AUTHOR_EMAIL": os.environ.get("REPAIRBOT_GIT_EMAIL", _BOT_EMAIL),
    }
    identity.update(GIT_COMMITTER_NAME=identity["GIT_AUTHOR_NAME"], GIT_COMMITTER_EMAIL=identity["GIT_AUTHOR_EMAIL"])
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=identity)
    return branch


# --------------------------------------------------------------------------------------------
# Publishing
# --------------------------------------------------------------------------------------------


def _auth_env(remote: str, token: str | None) -> dict[str, str]:
    """git configuration through the environment: the token never lands in a file or an argv."""
    if not token or not remote.startswith("https://"):
        return {}
    credentials = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{remote}.extraheader",
        "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {credentials}",
    }


def pr_body(markdown: str, sha: str, run_url: str | None) -> str:
    run = f"[the failed run]({run_url})" if run_url else "the failed run"
    head = (
        f"repairbot repaired the crash of {run} at `{sha[:12]}` and verified the fix by rerunning "
        "the script in that run's job. Review the change before merging.\n\n---\n\n"
    )
    room = PR_BODY_LIMIT - len(head)
    if len(markdown) > room:
        note = "\n\n[The report is cut here: the run's repairbot artifact holds all of it.]\n"
        markdown = markdown[: room - len(note)] + note
    return head + markdown


def _gh(args: Sequence[str], token: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"GH_TOKEN": token} if token else {}), "GH_PROMPT_DISABLED": "1", "NO_COLOR": "1"}
    result = subprocess.run(["gh", *args], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise Refused(f"gh {args[0]} {args[1] if len(args) > 1 else ''}: {result.stderr.strip()}")
    return result


def publish(repo: Path, artifact: Artifact, remote: str, repository: str, base: str, sha: str,
            run_url: str | None, token: str | None) -> dict[str, str]:
    """Push the prepared branch and open the pull request; the step's outputs."""
    branch = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
    if not branch.startswith(BRANCH_PREFIX):
        raise Refused(f"the checkout is on {branch or 'a detached HEAD'}, not on a prepared {BRANCH_PREFIX}... branch")
    git(repo, "check-ref-format", "--branch", base)
    auth = _auth_env(remote, token)
    if git(repo, "ls-remote", "--heads", remote, f"refs/heads/{branch}", env=auth).stdout.strip():
        annotation("notice", f"{branch} exists already: this fix was proposed before", title="repairbot")
        return {"branch": branch, "pull-request": ""}
    git(repo, "push", "--quiet", remote, f"HEAD:refs/heads/{branch}", env=auth)
    body = repo / ".git" / "repairbot-pr.md"
    body.write_text(pr_body(artifact.markdown, sha, run_url), encoding="utf-8")
    try:
        # --flag=value: a value that starts with "-" stays a value
        created = _gh(["pr", "create", f"--repo={repository}", f"--base={base}", f"--head={branch}",
                       f"--title={_title(artifact)}", f"--body-file={body}"], token)
    finally:
        body.unlink(missing_ok=True)
    url = created.stdout.strip().splitlines()[-1] if created.stdout.strip() else ""
    return {"branch": branch, "pull-request": url}


def comment(artifact: Artifact, repository: str, sha: str, run_url: str | None, token: str | None) -> str:
    """Post the report on the open pull request whose head is ``sha`` (a fork's); its number."""
    found = _gh(["pr", "list", f"--repo={repository}", "--state=open", f"--search={sha}",
                 "--json=number,headRefOid"], token)
    numbers = [item["number"] for item in json.loads(found.stdout or "[]") if item.get("headRefOid") == sha]
    if len(numbers) != 1:
        raise Refused(f"no single open pull request has the head {sha} (found {numbers})")
    number = str(int(numbers[0]))
    body = Path(os.environ.get("RUNNER_TEMP") or "/tmp") / "repairbot-comment.md"
    body.write_text(pr_body(artifact.markdown, sha, run_url), encoding="utf-8")
    try:
        _gh(["pr", "comment", number, f"--repo={repository}", f"--body-file={body}"], token)
    finally:
        body.unlink(missing_ok=True)
    return number


def _run_url(repository: str, run_id: str | None) -> str | None:
    if not run_id:
        return None
    if not run_id.isdigit():
        raise Refused(f"run id {run_id!r} is not a number")
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{repository}/actions/runs/{run_id}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stage_b.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("prepare", "publish", "comment"):
        sub = commands.add_parser(name)
        sub.add_argument("--artifact", type=Path, required=True, help="the downloaded artifact's folder")
        sub.add_argument("--sha", required=True, help="the failed run's head commit")
        sub.add_argument("--repository", default=os.environ.get("GITHUB_REPOSITORY", ""), help="owner/name")
        sub.add_argument("--run-id", help="the failed run's id (for links)")
        if name != "comment":
            sub.add_argument("--repo", type=Path, required=True, help="the checkout of the failed run's commit")
        if name == "publish":
            sub.add_argument("--base", required=True, help="the branch the pull request goes into")
            sub.add_argument("--remote", help="where to push (default: the repository on GitHub)")
    options = parser.parse_args(argv)
    token = os.environ.get("REPAIRBOT_TOKEN") or None
    try:
        artifact = read_artifact(options.artifact)
        run_url = _run_url(options.repository, options.run_id)
        if options.command == "prepare":
            patches = check_patch(artifact)
            check_checkout(options.repo, options.sha, patches)
            branch = apply_and_commit(options.repo, artifact, options.sha, run_url)
            set_outputs({"branch": branch, "title": _title(artifact)})
        elif options.command == "publish":
            server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
            remote = options.remote or f"{server}/{options.repository}.git"
            set_outputs(publish(options.repo, artifact, remote, options.repository, options.base,
                                options.sha, run_url, token))
        else:
            check_patch(artifact)
            set_outputs({"pull-request": comment(artifact, options.repository, options.sha, run_url, token)})
    except Refused as error:
        annotation("error", str(error), title="repairbot: refused")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
