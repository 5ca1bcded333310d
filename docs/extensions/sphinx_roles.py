"""Griffe extension: render the Sphinx roles of the package's docstrings as links.

The docstrings are written in numpy style with Sphinx cross-reference roles
(``:func:`compare_models```, ``:class:`~mlflow_recsys.evaluation.EvaluationResult```).
mkdocstrings does not understand roles, so this extension rewrites each one into
an optional autorefs reference: a link when the target is rendered somewhere in
the site, plain code otherwise (an optional reference never fails a strict build).

Names are resolved from the documented object's own scope, as Sphinx would:
``:func:`compare_models``` inside ``mlflow_recsys.stats._seeds`` points at the
function that module imports.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(?P<tilde>~?)(?P<target>[^`<>]+?)`")


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full dotted path of ``target`` as seen from ``obj``, or ``target`` itself if unknown."""
    head, _, rest = target.partition(".")
    scopes = [obj]
    if obj.parent is not None:
        scopes.append(obj.parent)
    for scope in scopes:
        try:
            path = scope.resolve(head)
        except (griffe.NameResolutionError, AttributeError, KeyError):
            continue
        return f"{path}.{rest}" if rest else path
    return target


def _rewrite(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match) -> str:
        target = match["target"].strip()
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
        identifier = html.escape(_resolve(obj, target), quote=True)
        return f'<autoref identifier="{identifier}" optional><code>{html.escape(shown)}</code></autoref>'

    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = _rewrite(obj, obj.docstring.value)
