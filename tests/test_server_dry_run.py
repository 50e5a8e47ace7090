"""``repairbot.fixDryRun``: ``repairbot fix --dry-run`` from the editor, its fix offered as a
workspace edit for review (a real LSP client, pytest-lsp, as in tests/test_server.py)."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any, Union

import psutil
import pytest

pytest.importorskip("pygls")
pytest.importorskip("pytest_lsp")

from lsprotocol import types
from pytest_lsp import LanguageClient

from repairbot.server.dry_run import ACTION_KIND, COMMAND, MARK, DryRunner
from tests.support import commit_all, copy_project, git, init_repo, run_cli, snapshot
from tests.test_server import (
    ROOT,
    SCRIPT,
    RawClient,
    actions,
    applied,
    diagnostics,
    hover,
    opened,
    session,
)

MAIN_GUARD = "import torch\n\n\ndef main():\n    torch.exp(torch.ones(2)) - 1\n\n\nif __name__ == '__main__':\n    main()\n"


def fixture_repo(tmp_path: Path, name: str) -> Path:
    repo = init_repo(tmp_path / "repo")
    copy_project(ROOT / "fixtures" / name, repo)
    commit_all(repo)
    return repo


def review_edits(client: LanguageClient) -> list[types.ApplyWorkspaceEditParams]:
    """The workspace/applyEdit requests the server sends from now on (each accepted)."""
    received: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        received.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    return received


def read_code_actions_as_the_spec_says(client: LanguageClient) -> None:
    """lsprotocol (2025.0.0) reads every item of a code action response that has a `command` as
    a Command, a CodeAction with a command (this one) included; the spec tells them apart by the
    command's type: a Command's is a string, a CodeAction's an object. Editors do so."""
    converter = client.protocol._converter

    def structure(item: dict[str, Any], _: type) -> types.Command | types.CodeAction:
        if isinstance(item.get("command"), str):
            return converter.structure(item, types.Command)
        return converter.structure(item, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], structure)  # noqa: UP007


async def dry_run(client: LanguageClient, *arguments: Any) -> Any:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=COMMAND, arguments=list(arguments)))


def without_change_annotations(capabilities: types.ClientCapabilities) -> None:
    assert capabilities.workspace is not None and capabilities.workspace.workspace_edit is not None
    capabilities.workspace.workspace_edit.change_annotation_support = None


def text_edits(edit: types.WorkspaceEdit, uri: str, annotated: bool) -> list[types.TextEdit]:
    """The edits of one document, checked to be in the form the client asked for: versioned and
    waiting for the user's confirmation, or plain."""
    if not annotated:
        assert edit.document_changes is None and edit.changes is not None and list(edit.changes) == [uri]
        return list(edit.changes[uri])
    assert edit.changes is None and edit.document_changes is not None and edit.change_annotations is not None
    (change,) = edit.document_changes
    assert isinstance(change, types.TextDocumentEdit)
    assert change.text_document.uri == uri and change.text_document.version == 1  # the document as opened
    annotations = {e.annotation_id for e in change.edits if isinstance(e, types.AnnotatedTextEdit)}
    assert len(annotations) == 1 and edit.change_annotations[annotations.pop()].needs_confirmation is True
    return list(change.edits)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("annotated", [True, False], ids=["confirmed", "plain"])
async def test_the_dry_run_fix_is_offered_as_an_edit_and_nothing_changes(tmp_path: Path, annotated: bool) -> None:
    repo = fixture_repo(tmp_path, "cnn_flatten_size")
    before, branches = snapshot(repo), git(repo, "branch", "--list")
    # what the command line prints, applied by git to a copy: the text the edit must give
    printed = run_cli("fix", "--dry-run", "train.py", cwd=repo, env={"OMP_NUM_THREADS": "1"})
    assert printed.returncode == 0, printed.stdout + printed.stderr
    scratch = tmp_path / "expected"
    scratch.mkdir()
    shutil.copy(repo / "train.py", scratch / "train.py")
    (scratch / "printed.txt").write_text(printed.stdout)
    git(scratch, "apply", "printed.txt")
    expected = (scratch / "train.py").read_text()
    summary = re.search(r"^Fix: (.+)$", printed.stdout, re.MULTILINE)
    error = re.search(r"^Error: (.+) at train\.py:\d+$", printed.stdout, re.MULTILINE)
    assert summary is not None and error is not None and expected != (repo / "train.py").read_text()
    text = (repo / "train.py").read_text()
    async with session(adjust=None if annotated else without_change_annotations) as client:
        read_code_actions_as_the_spec_says(client)
        edits = review_edits(client)
        uri = opened(client, repo / "train.py", text)
        await diagnostics(client, uri)
        offered = [a for a in await actions(client, uri, only=["source"]) if a.kind == ACTION_KIND]
        assert len(offered) == 1 and offered[0].command is not None and offered[0].edit is None
        assert offered[0].command.command == COMMAND
        running = asyncio.ensure_future(dry_run(client, *(offered[0].command.arguments or [])))
        # the server answers while the dry run runs: a hover, and the diagnostics of a file opened now
        assert await hover(client, uri, 0) is None
        other = opened(client, repo / "other.py", SCRIPT)
        assert len(await diagnostics(client, other)) == 2
        assert not running.done()
        answer = await asyncio.wait_for(running, 300)
        assert answer == {"status": "fixed", "stop_reason": "passing", "applied": True}
        assert len(edits) == 1
        assert applied(text, text_edits(edits[0].edit, uri, annotated)) == expected
        shown = [m for m in client.messages if m.message.startswith("repairbot fix --dry-run")]
        assert len(shown) == 1 and shown[0].type == types.MessageType.Info
        assert "fixed 1 error" in shown[0].message and summary[1] in shown[0].message
        assert error[1] in shown[0].message
    assert snapshot(repo) == before  # the files on disk, the index, HEAD, the stash: as they were
    assert git(repo, "branch", "--list") == branches  # and no branch made


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_dry_run_without_a_fix_says_why_and_offers_no_edit(tmp_path: Path) -> None:
    repo = fixture_repo(tmp_path, "diagnosed_broadcast_residual")
    before = snapshot(repo)
    async with session() as client:
        edits = review_edits(client)
        uri = opened(client, repo / "train.py", (repo / "train.py").read_text())
        answer = await asyncio.wait_for(dry_run(client, {"uri": uri}), 300)
        assert answer == {"status": "gave-up", "stop_reason": "diagnosed", "applied": False}
        shown = [m for m in client.messages if m.message.startswith("repairbot fix --dry-run")]
        assert len(shown) == 1 and shown[0].type == types.MessageType.Warning
        assert "found no fix: diagnosed (the failure is recognised, but not fixed automatically)" in shown[0].message
        assert edits == []
    assert snapshot(repo) == before


@pytest.mark.asyncio
async def test_the_command_is_advertised_and_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(MAIN_GUARD)
    raw = await RawClient.start(tmp_path)
    await raw.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    capabilities = (await raw.answer(1))["result"]["capabilities"]
    assert capabilities["executeCommandProvider"]["commands"] == [COMMAND]
    assert ACTION_KIND in capabilities["codeActionProvider"]["codeActionKinds"]
    raw.process.kill()
    await raw.process.wait()
    async with session() as client:
        edits = review_edits(client)
        # a document with unsaved changes: the dry run would run another text than the editor's
        uri = opened(client, tmp_path / "train.py", MAIN_GUARD + "# more\n")
        answer = await dry_run(client, uri)
        assert answer["applied"] is False and "save it first" in client.messages[-1].message
        assert client.messages[-1].type == types.MessageType.Error
        for wrong in ((tmp_path / "notes.txt").as_uri(), (tmp_path / "missing.py").as_uri(), 3):
            await dry_run(client, wrong)
            assert "takes the URI of a saved .py file" in client.messages[-1].message
        await dry_run(client)
        assert "takes the URI of a saved .py file" in client.messages[-1].message
        assert edits == []


@pytest.mark.asyncio
async def test_the_dry_run_action_is_offered_on_scripts_only(tmp_path: Path) -> None:
    top_level = "import torch\nmodel = torch.nn.Linear(2, 1)\nfor x in [torch.ones(2)]:\n    model(x).sum().backward()\n"
    async with session() as client:
        read_code_actions_as_the_spec_says(client)
        for name, text, wanted in (("main.py", MAIN_GUARD, True), ("loop.py", top_level, True), ("lib.py", SCRIPT, False)):
            uri = opened(client, tmp_path / name, text)
            kinds = [a.kind for a in await actions(client, uri)]
            assert (ACTION_KIND in kinds) is wanted, (name, kinds)
            assert ACTION_KIND not in [a.kind for a in await actions(client, uri, only=["source.fixAll"])]
            assert ACTION_KIND not in [a.kind for a in await actions(client, uri, only=["quickfix"])]


@pytest.mark.torch
@pytest.mark.slow
def test_a_dry_run_past_its_time_limit_is_stopped_with_its_whole_process_tree(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "train.py").write_text("import time\n\ntime.sleep(300)\n")
    commit_all(repo)
    result = DryRunner().run(repo / "train.py", timeout_s=8)
    assert result.status == "error" and "did not finish within 8 s and was stopped" in result.message
    assert result.fixed == {}
    left = []
    for process in psutil.process_iter():
        try:
            if MARK in process.environ():
                left.append(process)
        except (psutil.Error, OSError):
            continue
    assert left == []
