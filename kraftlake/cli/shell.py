"""``kraftlake shell LOG``: browse the cluster at a point in time with kafka-metadata-shell's paths
and habits (``ls``, ``cat``, ``cd``, ``find``), plus ``at OFFSET`` to move in time and
``diff OFFSET`` to see what changed since another point."""

from __future__ import annotations

import cmd
import posixpath
import shlex
import sys
from typing import Any

import typer

from kraftlake.cli.console import STORAGE_OPTION, out, storage_options
from kraftlake.records.errors import KraftlakeError


def image_tree(view) -> dict[str, Any]:
    """The image as kafka-metadata-shell lays it out: /image/features, /image/cluster/brokers/<id>,
    /image/topics/byName/<name>/<partition> and byId/<id>/<partition>, /image/configs/..."""
    import msgspec

    img = msgspec.to_builtins(view.image())
    names = {t["id"]: t["name"] for t in img["topics"]}
    by_name: dict[str, Any] = {}
    by_id: dict[str, Any] = {}
    for t in img["topics"]:
        by_name[t["name"]] = {"id": t["id"], "name": t["name"]}
        by_id[t["id"]] = by_name[t["name"]]
    for p in img["partitions"]:
        by_id[p["topic_id"]][str(p["partition"])] = p
        by_name[names[p["topic_id"]]] = by_id[p["topic_id"]]
    configs: dict[str, Any] = {}
    for c in img["configs"]:
        configs.setdefault({2: "topic", 4: "broker"}.get(c["resource_type"], str(c["resource_type"])), {})[
            c["resource_name"] or "<default>"
        ] = c["configs"]
    return {
        "image": {
            "provenance": {"offset": img["offset"], "state_hash": img["state_hash"]},
            "features": img["features"],
            "cluster": {
                "brokers": {str(b["id"]): b for b in img["brokers"]},
                "controllers": {str(c["id"]): c for c in img["controllers"]},
            },
            "topics": {"byName": by_name, "byId": by_id},
            "configs": configs,
            "producerIds": img["producer_ids"] or {},
        }
    }


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out_: dict[str, Any] = {}
        for k, v in node.items():
            out_.update(_flat(v, f"{prefix}/{k}"))
        return out_ or {prefix: {}}
    return {prefix: node}


def _diff(a: Any, b: Any, path: str):
    """Lines for what differs from ``a`` (then) to ``b`` (now): "+ path" for a node that appeared,
    "- path" for one that went, "path: old -> new" for a changed value. Topics by id repeat them
    by name, and the provenance always differs: both are left out."""
    if path in ("/image/provenance", "/image/topics/byId"):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}/{k}"
            if k not in a:
                yield f"+ {sub}"
            elif k not in b:
                yield f"- {sub}"
            else:
                yield from _diff(a[k], b[k], sub)
    elif a != b:
        yield f"{path}: {a} -> {b}"


class Shell(cmd.Cmd):
    intro = "kraftlake shell: ls, cat, cd, pwd, find, tree, at OFFSET, diff OFFSET, help, exit"

    def __init__(self, log, offset: int | None, stdin=None) -> None:
        super().__init__(stdin=stdin)
        if stdin is not None and not stdin.isatty():
            self.use_rawinput = False
            self.intro = None
        self.log, self.cwd = log, "/image"
        self._goto(offset)

    def _goto(self, offset: int | None) -> None:
        from kraftlake.replay.state import state_at

        view = state_at(self.log, offset=offset).published()
        self.offset, self.tree = view.offset, image_tree(view)
        self.prompt = f"[{self.offset}] {self.cwd} > " if self.use_rawinput else ""

    def _node(self, path: str) -> Any:
        full = posixpath.normpath(posixpath.join(self.cwd, path or "."))
        node: Any = self.tree
        for part in [p for p in full.split("/") if p]:
            if not isinstance(node, dict) or part not in node:
                raise KeyError(full)
            node = node[part]
        return full, node

    def _err(self, message: str) -> None:
        out.print(f"[red]{message}[/]")

    def do_ls(self, arg: str) -> None:
        """ls [PATH]: the children of a directory (or the name of a file)."""
        try:
            path, node = self._node(arg)
        except KeyError as exc:
            return self._err(f"ls: {exc.args[0]}: no such node")
        if isinstance(node, dict):
            for k in node:
                out.print(k + ("/" if isinstance(node[k], dict) else ""), highlight=False)
        else:
            out.print(posixpath.basename(path))

    def do_cat(self, arg: str) -> None:
        """cat PATH: a node's contents as JSON."""
        import msgspec

        try:
            _, node = self._node(arg)
        except KeyError as exc:
            return self._err(f"cat: {exc.args[0]}: no such node")
        out.print(msgspec.json.format(msgspec.json.encode(node)).decode(), highlight=False)

    def do_cd(self, arg: str) -> None:
        """cd [PATH]: move (default /image)."""
        try:
            path, node = self._node(arg or "/image")
        except KeyError as exc:
            return self._err(f"cd: {exc.args[0]}: no such node")
        if not isinstance(node, dict):
            return self._err(f"cd: {path}: not a directory")
        self.cwd = path
        if self.use_rawinput:
            self.prompt = f"[{self.offset}] {self.cwd} > "

    def do_pwd(self, arg: str) -> None:
        """pwd: where you are, and at which offset."""
        out.print(f"{self.cwd} (offset {self.offset})")

    def do_find(self, arg: str) -> None:
        """find [PATH]: every node under PATH."""
        try:
            path, node = self._node(arg)
        except KeyError as exc:
            return self._err(f"find: {exc.args[0]}: no such node")
        for p in _flat(node, path):
            out.print(p, highlight=False)

    do_tree = do_find

    def do_at(self, arg: str) -> None:
        """at OFFSET: move to the state after the record at OFFSET (at end: the end of the log)."""
        try:
            offset = None if arg.strip() in ("", "end") else int(arg)
            self._goto(offset)
        except (ValueError, KraftlakeError) as exc:  # a bad number, an offset the log does not have
            return self._err(f"at: {exc}")
        out.print(f"at offset {self.offset}")

    def do_diff(self, arg: str) -> None:
        """diff OFFSET: what changed between the state at OFFSET and the current one, forward in
        time whichever is earlier (``old -> new``)."""
        from kraftlake.replay.state import state_at

        try:
            view = state_at(self.log, offset=int(arg)).published()
        except (ValueError, KraftlakeError) as exc:
            return self._err(f"diff: {exc}")
        other = image_tree(view)
        if view.offset > self.offset:
            (lo, before), (hi, after) = (self.offset, self.tree), (view.offset, other)
        else:
            (lo, before), (hi, after) = (view.offset, other), (self.offset, self.tree)
        changes = list(_diff(before["image"], after["image"], "/image"))
        if not changes:
            out.print(f"no difference between offsets {lo} and {hi}")
            return
        out.print(f"from offset {lo} to offset {hi}:", highlight=False)
        for line in changes:
            out.print(line, highlight=False)

    def do_exit(self, arg: str) -> bool:
        """exit: leave."""
        return True

    do_quit = do_exit
    do_EOF = do_exit

    def emptyline(self) -> bool:
        return False

    def default(self, line: str) -> None:
        self._err(f"unknown command {shlex.split(line)[0] if line.strip() else line!r}: try help")


def register(app: typer.Typer) -> None:
    @app.command("shell")
    def shell(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        offset: int | None = typer.Option(
            None, "--offset", "-o", help="Start after the record at this offset (default: the end)."
        ),
        command: list[str] = typer.Option([], "--command", "-c", help="Run these commands and exit (repeatable)."),
    ) -> None:
        """Browse the cluster at a point in time like kafka-metadata-shell: paths such as /image/cluster/brokers/1 and /image/topics/byName/foo/0, with ls, cat, cd, pwd, find; plus at OFFSET to move in time and diff OFFSET to see what changed. Commands come from the terminal, from stdin, or from -c."""
        from kraftlake.records import Log

        sh = Shell(Log.open(log, storage_options=storage_options(storage_option)), offset, stdin=sys.stdin)
        if command:
            for c in command:
                sh.onecmd(c)
            return
        sh.cmdloop()
