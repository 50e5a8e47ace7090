"""Stage B of the GitHub Action: a ``workflow_run`` job that proposes Stage A's patch.

It holds a write token, so it treats the artifact as untrusted data and never runs any of the
code it checks out:

``prepare``: checks the artifact (only the expected regular files, size limits, a
``repairbot.report/1`` report whose diff is the patch), checks the patch (a plain unified diff
whose every file is a tracked regular file under the repository, no ``.github/`` file, no
``.git`` path, no symlink on the way, no creation, deletion, rename or mode change), checks
that the checkout is the failed run's commit, then ``git apply --check``, ``git apply`` and one
commit on a new local ``repairbot/fix-<sha12>-<patch8>`` branch (hooks off). The commit's
dates are the failed commit's, so the same fix of the same commit is the same commit again.
A report that is not ``fixed`` (a repair that gave up) is "nothing to propose": the job summary
says why and the step succeeds.

``publish``: with ``--mode suggest`` and a failed run of a same-repository pull request, posts
the fix as a review of that pull request whose comments are suggestion blocks on the changed
lines (when every changed line is in the pull request's diff). Otherwise it pushes the branch
(the token comes from ``REPAIRBOT_TOKEN`` and is handed to git through the environment, never
written to a config file or a command line) and opens a pull request whose body is the Markdown
report. Idempotent: a branch pushed before is not pushed again, a pull request (or review) that
exists is named instead of a new one, and a rerun after a failed ``gh`` call opens it.

``comment``: for a run from a fork (only where the workflow allows forks), posts the report as a
comment on the pull request instead (once): nothing is pushed.

Every refusal and every failure is one ``::error`` line and exit 1. Standard library, git and
the ``gh`` CLI only.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run by path, as the workflow does
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from repairbot.action.github import annotation, append_summary, set_outputs
from repairbot.output.diff import FilePatch, PatchError, parse_patch
from repairbot.output.report import SCHEMA

# What Stage A uploads, and the most each file may weigh.
ARTIFACT_FILES = {"report.json": 8 << 20, "report.md": 1 << 20, "report.sarif": 8 << 20, "fix.patch": 1 << 20}
REQUIRED_FILES = ("report.json", "report.md")  # fix.patch too when the report is "fixed"
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


class NothingToPropose(Exception):
    """A sound artifact without a verified fix (the repair gave up): the job ends green."""

    def __init__(self, reason: str, markdown: str) -> None:
        super().__init__(reason)
        self.markdown = markdown


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
        raise Refused(f"artifact: missing {missing}")
    try:
        report = json.loads(_read(folder, "report.json"))
    except json.JSONDecodeError as error:
        raise Refused(f"artifact: report.json is not JSON: {error}") from None
    if not isinstance(report, dict) or report.get("schema") != SCHEMA:
        raise Refused(f"artifact: report.json is not a {SCHEMA} report")
    markdown = _read(folder, "report.md")
    status, stop_reason = report.get("status"), report.get("stop_reason")
    if status != "fixed":
        if status not in ("already-passing", "gave-up", "error") or not isinstance(stop_reason, str) \
                or not _PATTERN_ID.match(stop_reason):
            raise Refused(f"artifact: the report's status {status!r} / stop reason {stop_reason!r} is not one of repairbot's")
        why = "the script passed under repairbot" if status == "already-passing" else f"the repair ended {status} ({stop_reason})"
        raise NothingToPropose(f"nothing to propose: {why}, so there is no verified fix", markdown)
    if "fix.patch" not in names:
        raise Refused("artifact: the report says fixed but there is no fix.patch")
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
    return Artifact(report, markdown, patch, tuple(files), tuple(patterns))


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


def branch_name(sha: str, patch: str) -> str:
    """One branch per commit and fix: a rerun finds its own branch, another fix gets another."""
    return f"{BRANCH_PREFIX}{sha[:12]}-{hashlib.sha256(patch.encode('utf-8')).hexdigest()[:8]}"


def _title(artifact: Artifact) -> str:
    patterns = ", ".join(artifact.patterns) or "a crash"
    return f"repairbot: fix {patterns} in {', '.join(artifact.files)}"


def apply_and_commit(repo: Path, artifact: Artifact, sha: str, run_url: str | None) -> str:
    """Apply the checked patch and commit it on a new local branch; the branch's name."""
    patch_file = (repo / ".git" / "repairbot.patch").resolve()
    patch_file.write_text(artifact.patch, encoding="utf-8")
    try:
        git(repo, "apply", "--check", str(patch_file))
        git(repo, "apply", str(patch_file))
    finally:
        patch_file.unlink(missing_ok=True)
    changed = sorted(git(repo, "diff", "--name-only", "-z").stdout.strip("\0").split("\0"))
    if changed != sorted(artifact.files):
        raise Refused(f"git apply changed {changed}, expected {sorted(artifact.files)}")
    branch = branch_name(sha, artifact.patch)
    git(repo, "check-ref-format", "--branch", branch)
    git(repo, "switch", "--quiet", "-c", branch)
    git(repo, "add", "--", *artifact.files)
    origin = f"the failed run {run_url}" if run_url else "a failed run"
    message = (
        f"{_title(artifact)}\n\nProposed by repairbot for {origin} at {sha}: the fix was verified by "
        f"rerunning the script in that run's job.\n\n"
        + "".join(f"Repairbot-Pattern: {p}\n" for p in artifact.patterns)
    )
    name = os.environ.get("REPAIRBOT_GIT_NAME", _BOT_NAME)
    email = os.environ.get("REPAIRBOT_GIT_EMAIL", _BOT_EMAIL)
    # the failed commit's date: the same fix of the same commit is the very same commit
    date = git(repo, "log", "-1", "--format=%cI", sha).stdout.strip()
    identity = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                "GIT_COMMITTER_EMAIL": email, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git(repo, "commit", "--quiet", "--no-verify", "-m", message, env=identity)
    return branch


# --------------------------------------------------------------------------------------------
# Publishing
# --------------------------------------------------------------------------------------------

_PERMISSION_HINT = (
    "if GitHub says Actions may not create pull requests, turn on Settings > Actions > General > "
    "'Allow GitHub Actions to create and approve pull requests' (or use a GitHub App token), then "
    "re-run this job: it reuses the pushed branch"
)


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


def marker(branch: str) -> str:
    """The hidden line by which a rerun recognises what it posted before."""
    return f"<!-- repairbot: {branch} -->"


def pr_body(markdown: str, sha: str, run_url: str | None, tail: str = "") -> str:
    run = f"[the failed run]({run_url})" if run_url else "the failed run"
    head = (
        f"repairbot repaired the crash of {run} at `{sha[:12]}` and verified the fix by rerunning "
        "the script in that run's job. Review the change before merging.\n\n---\n\n"
    )
    tail = f"\n\n{tail}\n" if tail else ""
    room = PR_BODY_LIMIT - len(head) - len(tail)
    if len(markdown) > room:
        note = "\n\n[The report is cut here: the run's repairbot artifact holds all of it.]\n"
        markdown = markdown[: room - len(note)] + note
    return head + markdown + tail


def _tell(title: str, message: str) -> None:
    """What a step did or did not do: a notice in the log and a section of the job summary."""
    annotation("notice", message, title="repairbot")
    append_summary(f"## repairbot: {title}\n\n{message}.\n")


def _marked(endpoint: str, tag: str, token: str | None) -> dict[str, Any] | None:
    """The review or comment (listed at ``endpoint``) that a run posted before with ``tag``."""
    for item in _gh_json(["api", f"{endpoint}?per_page=100"], token) or []:
        if isinstance(item, dict) and tag in str(item.get("body") or ""):
            return item
    return None


def require_gh(token: str | None) -> None:
    """Before anything is pushed: the GitHub CLI and a token are there."""
    if shutil.which("gh") is None:
        raise Refused("the GitHub CLI `gh` is not on PATH (GitHub-hosted runners have it; install it on a self-hosted runner)")
    if not token:
        raise Refused("no token: set REPAIRBOT_TOKEN for this step (the example passes the App token or github.token)")


def _gh(args: Sequence[str], token: str | None, hint: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"GH_TOKEN": token} if token else {}), "GH_PROMPT_DISABLED": "1", "NO_COLOR": "1"}
    try:
        result = subprocess.run(["gh", *args], capture_output=True, text=True, env=env, check=False)
    except OSError as error:
        raise Refused(f"gh could not be run: {error}") from None
    if result.returncode != 0:
        said = " ".join((result.stderr.strip() or result.stdout.strip() or f"exit code {result.returncode}").split())
        raise Refused(f"gh {' '.join(a for a in args[:2] if not a.startswith('-'))} failed: {said[:500]}"
                      + (f"; {hint}" if hint else ""))
    return result


def _gh_json(args: Sequence[str], token: str | None) -> Any:
    result = _gh(args, token)
    try:
        return json.loads(result.stdout or "null")
    except json.JSONDecodeError:
        raise Refused(f"gh {' '.join(args[:2])}: the answer is not JSON") from None


def _push(repo: Path, branch: str, remote: str, token: str | None) -> str:
    """Push the branch unless it is there already; what happened, in words."""
    auth = _auth_env(remote, token)
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    listed = git(repo, "ls-remote", "--heads", remote, f"refs/heads/{branch}", env=auth).stdout.split()
    if listed:
        same = listed[0] == head
        return f"{branch} was pushed before" + (" (the same commit)" if same else f" (now at {listed[0][:12]}: left as it is)")
    git(repo, "push", "--quiet", remote, f"HEAD:refs/heads/{branch}", env=auth)
    return f"pushed {branch}"


def _existing_pull_request(repository: str, branch: str, token: str | None) -> dict[str, Any] | None:
    found = _gh_json(["pr", "list", f"--repo={repository}", f"--head={branch}", "--state=all",
                      "--json=number,url,state"], token)
    items = [item for item in found or [] if isinstance(item, dict)]
    items.sort(key=lambda item: item.get("state") != "OPEN")  # an open one first
    return items[0] if items else None


def open_pull_request(repo: Path, artifact: Artifact, remote: str, repository: str, base: str, sha: str,
                      run_url: str | None, token: str | None) -> dict[str, str]:
    """Push the prepared branch and open its pull request, or name the one that exists."""
    branch = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
    git(repo, "check-ref-format", "--branch", base)
    pushed = _push(repo, branch, remote, token)
    existing = _existing_pull_request(repository, branch, token)
    if existing is not None:
        url, state = str(existing.get("url", "")), str(existing.get("state", "")).lower()
        _tell("proposed before", f"{pushed}; its pull request {url} exists already ({state}): this fix was "
              "proposed before, nothing new was opened")
        return {"branch": branch, "pull-request": url, "review": ""}
    body = repo / ".git" / "repairbot-pr.md"
    body.write_text(pr_body(artifact.markdown, sha, run_url, marker(branch)), encoding="utf-8")
    try:
        # --flag=value: a value that starts with "-" stays a value
        created = _gh(["pr", "create", f"--repo={repository}", f"--base={base}", f"--head={branch}",
                       f"--title={_title(artifact)}", f"--body-file={body}"], token, _PERMISSION_HINT)
    finally:
        body.unlink(missing_ok=True)
    lines = created.stdout.strip().splitlines()
    url = lines[-1] if lines else ""
    print(f"repairbot: {pushed}, opened {url}")
    append_summary(f"## repairbot: pull request opened\n\n{url} proposes the fix on `{branch}` (into `{base}`).\n")
    return {"branch": branch, "pull-request": url, "review": ""}


def _commentable_ranges(file_patch: str) -> list[range]:
    """The lines of the head's file that a review may comment on: each hunk's new side."""
    ranges = []
    for header in re.finditer(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", file_patch, re.MULTILINE):
        start, count = int(header[1]), int(header[2] if header[2] is not None else 1)
        ranges.append(range(start, start + count))
    return ranges


def _fence(lines: Sequence[str]) -> str:
    longest = max((len(m) for line in lines for m in re.findall(r"`{3,}", line)), default=2)
    return "`" * (longest + 1)


def suggestions(patches: Sequence[FilePatch], note: str) -> list[dict[str, Any]]:
    """One review comment per hunk: a suggestion block replacing the hunk's changed lines of the
    head's file (old side of the patch) by the fixed ones; a pure insertion takes in the line above."""
    comments = []
    for patch in patches:
        for hunk in patch.hunks:
            changed = [i for i, (tag, _) in enumerate(hunk.lines) if tag != " "]
            first, last = changed[0], changed[-1]
            if not any(tag == "-" for tag, _ in hunk.lines[first:last + 1]):
                if first > 0:
                    first -= 1
                else:
                    last += 1
            before = sum(1 for tag, _ in hunk.lines[:first] if tag != "+")
            start = hunk.old_start + before
            end = start + sum(1 for tag, _ in hunk.lines[first:last + 1] if tag != "+") - 1
            new = [text.rstrip("\r\n") for tag, text in hunk.lines[first:last + 1] if tag != "-"]
            fence = _fence(new)
            comment: dict[str, Any] = {
                "path": patch.path, "side": "RIGHT", "line": end,
                "body": f"{note}\n\n{fence}suggestion\n" + "".join(f"{line}\n" for line in new) + fence,
            }
            if start != end:
                comment.update(start_line=start, start_side="RIGHT")
            comments.append(comment)
    return comments


def suggest(repo: Path, artifact: Artifact, repository: str, number: int, sha: str, run_url: str | None,
            token: str | None) -> dict[str, str] | None:
    """Post the fix as a review of pull request ``number`` with suggestion blocks; None when a
    changed line is outside the pull request's diff (a review cannot comment there)."""
    branch = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
    api = f"repos/{repository}/pulls/{number}"
    pull = _gh_json(["api", api], token) or {}
    url = str(pull.get("html_url", ""))
    head = (pull.get("head") or {}).get("sha")
    if head != sha:
        _tell("nothing posted", f"pull request #{number} is at {str(head)[:12]} now, not at the failed commit "
              f"{sha[:12]}: no review posted (the newer run's repair applies)")
        return {"branch": "", "pull-request": url, "review": ""}
    files = _gh_json(["api", f"{api}/files?per_page=100"], token) or []
    ranges = {item.get("filename"): _commentable_ranges(item.get("patch") or "") for item in files if isinstance(item, dict)}
    comments = suggestions(parse_patch(artifact.patch), f"repairbot: {', '.join(artifact.patterns) or 'fix'}, verified by rerunning the script.")
    for comment in comments:
        lines = range(comment.get("start_line", comment["line"]), comment["line"] + 1)
        if not any(lines.start in r and lines.stop - 1 in r for r in ranges.get(comment["path"], [])):
            annotation("notice", f"{comment['path']}:{comment['line']} is outside the diff of pull request "
                       f"#{number}: a review cannot suggest it there, so a pull request is opened instead",
                       title="repairbot")
            return None
    tag = marker(branch)
    review = _marked(f"{api}/reviews", tag, token)
    if review is not None:
        review_url = str(review.get("html_url", ""))
        _tell("proposed before", f"the review {review_url} suggests this fix already: this fix was proposed before, "
              "nothing new was posted")
        return {"branch": "", "pull-request": url, "review": review_url}
    request = {"commit_id": sha, "event": "COMMENT", "body": pr_body(artifact.markdown, sha, run_url, tag),
               "comments": comments}
    body = repo / ".git" / "repairbot-review.json"
    body.write_text(json.dumps(request), encoding="utf-8")
    try:
        posted = _gh_json(["api", "--method=POST", f"{api}/reviews", f"--input={body}"], token) or {}
    finally:
        body.unlink(missing_ok=True)
    review_url = str(posted.get("html_url", ""))
    print(f"repairbot: posted the fix as {len(comments)} suggestion(s) in the review {review_url}")
    append_summary(f"## repairbot: review posted\n\n{review_url} suggests the fix on pull request #{number} "
                   f"({len(comments)} suggestion(s), one click each to apply).\n")
    return {"branch": "", "pull-request": url, "review": review_url}


def publish(repo: Path, artifact: Artifact, remote: str, repository: str, base: str, sha: str,
            run_url: str | None, token: str | None, mode: str = "pull-request",
            pull_request: int | None = None) -> dict[str, str]:
    """Propose the prepared fix: a review with suggestions (mode suggest, on a same-repository
    pull request's run) or a pushed branch and a pull request; the step's outputs."""
    branch = git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False).stdout.strip()
    if not branch.startswith(BRANCH_PREFIX):
        raise Refused(f"the checkout is on {branch or 'a detached HEAD'}, not on a prepared {BRANCH_PREFIX}... branch")
    require_gh(token)
    if mode == "suggest":
        if pull_request is not None:
            reviewed = suggest(repo, artifact, repository, pull_request, sha, run_url, token)
            if reviewed is not None:
                return reviewed
        else:
            annotation("notice", "mode suggest: the failed run is not a same-repository pull request's, "
                       "so the fix is proposed as a pull request", title="repairbot")
    return open_pull_request(repo, artifact, remote, repository, base, sha, run_url, token)


def comment(artifact: Artifact, repository: str, sha: str, run_url: str | None, token: str | None) -> str:
    """Post the report on the open pull request whose head is ``sha`` (a fork's), once; its number."""
    require_gh(token)
    found = _gh_json(["pr", "list", f"--repo={repository}", "--state=open", f"--search={sha}",
                      "--json=number,headRefOid"], token)
    numbers = [item["number"] for item in found or [] if isinstance(item, dict) and item.get("headRefOid") == sha]
    if len(numbers) != 1:
        raise Refused(f"no single open pull request has the head {sha} (found {numbers})")
    number = str(int(numbers[0]))
    tag = marker(branch_name(sha, artifact.patch))
    posted = _marked(f"repos/{repository}/issues/{number}/comments", tag, token)
    if posted is not None:
        _tell("proposed before", f"pull request #{number} has this report already ({posted.get('html_url', '')}): "
              "nothing new posted")
        return number
    body = Path(os.environ.get("RUNNER_TEMP") or "/tmp") / "repairbot-comment.md"
    body.write_text(pr_body(artifact.markdown, sha, run_url, tag), encoding="utf-8")
    try:
        _gh(["pr", "comment", number, f"--repo={repository}", f"--body-file={body}"], token)
    finally:
        body.unlink(missing_ok=True)
    print(f"repairbot: posted the report on pull request #{number} (from a fork: nothing pushed)")
    append_summary(f"## repairbot: report posted\n\nThe fix is proposed in a comment on pull request #{number} "
                   "(a fork's: nothing of it was checked out or pushed).\n")
    return number


def _run_url(repository: str, run_id: str | None) -> str | None:
    if not run_id:
        return None
    if not run_id.isdigit():
        raise Refused(f"run id {run_id!r} is not a number")
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{repository}/actions/runs/{run_id}"


def event_pull_request(sha: str) -> int | None:
    """The same-repository pull request the failed run belongs to, from the ``workflow_run``
    event (GitHub lists only those in ``pull_requests``): its number, or None."""
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        run = json.loads(Path(path).read_text(encoding="utf-8")).get("workflow_run") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if run.get("event") not in ("pull_request", "pull_request_review"):
        return None
    for pull in run.get("pull_requests") or []:
        head, base = pull.get("head") or {}, pull.get("base") or {}
        same = (head.get("repo") or {}).get("id") == (base.get("repo") or {}).get("id")
        if head.get("sha") == sha and same and isinstance(pull.get("number"), int):
            return int(pull["number"])
    return None


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
            sub.add_argument("--mode", choices=("pull-request", "suggest"), default="pull-request",
                             help="suggest: a review with suggestions on the failed run's pull request")
            sub.add_argument("--pull-request", type=int, help="that pull request (default: from the workflow_run event)")
    options = parser.parse_args(argv)
    token = os.environ.get("REPAIRBOT_TOKEN") or None
    try:
        artifact_dir = options.artifact.absolute()
        repo = options.repo.resolve() if getattr(options, "repo", None) else None
        run_url = _run_url(options.repository, options.run_id)
        artifact = read_artifact(artifact_dir)
        if options.command == "prepare":
            assert repo is not None
            patches = check_patch(artifact)
            check_checkout(repo, options.sha, patches)
            branch = apply_and_commit(repo, artifact, options.sha, run_url)
            print(f"repairbot: the patch applies to {options.sha[:12]}: committed on {branch}")
            set_outputs({"branch": branch, "title": _title(artifact)})
        elif options.command == "publish":
            assert repo is not None
            server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
            remote = options.remote or f"{server}/{options.repository}.git"
            number = options.pull_request if options.pull_request is not None else event_pull_request(options.sha)
            set_outputs(publish(repo, artifact, remote, options.repository, options.base, options.sha,
                                run_url, token, options.mode, number))
        else:
            check_patch(artifact)
            set_outputs({"pull-request": comment(artifact, options.repository, options.sha, run_url, token)})
    except NothingToPropose as nothing:
        annotation("notice", str(nothing), title="repairbot")
        append_summary(f"## repairbot: {nothing}\n\nThe run's report:\n\n{nothing.markdown}")
        set_outputs({"branch": "", "title": ""} if options.command == "prepare" else {"pull-request": ""})
        return 0
    except Refused as error:
        annotation("error", str(error), title="repairbot: refused")
        return 1
    except OSError as error:  # a file or folder of the runner that cannot be used: one line, no traceback
        annotation("error", f"{error.filename or ''}: {error.strerror or error}", title="repairbot")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
