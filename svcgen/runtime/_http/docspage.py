"""`GET {prefix}/docs`: the HTTP API document as one static HTML page, rendered here, once per app.

The page has no script and loads nothing: its Content-Security-Policy (sent as a header and repeated in a meta
tag) allows only its own inline style, by hash. Every operation is listed with its parameters, request body and
responses; every component schema follows with its properties, linked from wherever it is referenced.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from html import escape
from typing import Any, Final

from .._openapi import COMPONENT_REF

_STYLE: Final = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1em 2em; color: #1d2330; }
h1 { margin-bottom: 0.1em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccd; }
section.operation, section.schema { border: 1px solid #d8dce6; border-radius: 6px; margin: 1em 0; padding: 0.4em 1em; }
.method { display: inline-block; min-width: 4.5em; font-weight: 700; text-transform: uppercase; }
.path, code, pre { font-family: ui-monospace, monospace; } .deprecated { color: #a33; font-weight: 700; }
table { border-collapse: collapse; width: 100%; margin: 0.4em 0; } th, td { text-align: left; padding: 3px 8px;
border-bottom: 1px solid #eef; vertical-align: top; } th { font-weight: 600; color: #556; }
pre { background: #f5f6fa; padding: 0.5em; overflow-x: auto; margin: 0; }
"""
_STYLE_SOURCE: Final = "'sha256-" + base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode() + "'"
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; style-src {_STYLE_SOURCE}; img-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
DOCS_HEADERS: Final = {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "cache-control": "no-cache",
}


def docs_page(document: Mapping[str, Any]) -> bytes:
    info = document.get("info", {})
    title = escape(str(info.get("title", "")))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        f"<p>Version {escape(str(info.get('version', '')))} · OpenAPI {escape(str(document.get('openapi', '')))}"
        ' · <a href="http-api.json">http-api.json</a></p>',
    ]
    schemes = document.get("components", {}).get("securitySchemes", {})
    if schemes:
        parts.append(_schemes(schemes))
    parts.append('<h2 id="operations">Operations</h2>')
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            parts.append(_operation(method, path, operation))
    parts.append('<h2 id="schemas">Schemas</h2>')
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        parts.append(_schema_section(name, schema))
    parts.append("</body></html>\n")
    return "\n".join(parts).encode()


def _operation(method: str, path: str, operation: Mapping[str, Any]) -> str:
    operation_id = str(operation.get("operationId", ""))
    out = [
        f'<section class="operation" id="op-{escape(operation_id)}">',
        f'<h3><span class="method">{escape(method)}</span> <span class="path">{escape(path)}</span></h3>',
        f"<p><strong>{escape(str(operation.get('summary', '')))}</strong> "
        f'<code class="operation-id">{escape(operation_id)}</code></p>',
    ]
    if operation.get("deprecated"):
        out.append('<p class="deprecated">Deprecated</p>')
    if operation.get("description"):
        out.append(f"<p>{escape(str(operation['description']))}</p>")
    if "security" in operation:
        out.append(_security(operation["security"]))
    parameters = operation.get("parameters", [])
    if parameters:
        out.append('<h4>Parameters</h4><table class="parameters"><tr><th>Name</th><th>In</th><th>Required</th>'
                   "<th>Type</th><th>Description</th></tr>")  # fmt: skip
        for parameter in parameters:
            schema = parameter.get("schema")
            if schema is None:  # a JSON-encoded value: the schema sits under its media type
                schema = _media_schema(parameter.get("content"))
            note = "deprecated. " if parameter.get("deprecated") else ""
            if isinstance(schema, Mapping) and "default" in schema:  # the same default as the field's own schema
                note += f"default {json.dumps(schema['default'], ensure_ascii=False)}. "
            out.append(
                f'<tr class="parameter"><td><code>{escape(str(parameter["name"]))}</code></td>'
                f"<td>{escape(str(parameter['in']))}</td><td>{'yes' if parameter.get('required') else 'no'}</td>"
                f"<td>{_type(schema)}</td><td>{escape(note + str(parameter.get('description', '')))}</td></tr>"
            )
        out.append("</table>")
    body = operation.get("requestBody")
    if body is not None:
        schema = _media_schema(body.get("content"))
        required = "required" if body.get("required") else "optional"
        out.append(f'<h4>Request body</h4><p class="request-body">JSON ({required}): {_type(schema)}</p>')
    out.append('<h4>Responses</h4><table class="responses"><tr><th>Code</th><th>Status</th><th>Body</th></tr>')
    for code, response in operation.get("responses", {}).items():
        content = response.get("content")
        shown = _type(_media_schema(content)) if content else "no content"
        out.append(
            f'<tr class="response"><td>{escape(code)}</td><td>{escape(str(response.get("description", "")))}</td>'
            f"<td>{shown}</td></tr>"
        )
    out.append("</table></section>")
    return "\n".join(out)


def _schemes(schemes: Mapping[str, Any]) -> str:
    out = ['<h2 id="security">Security</h2><table class="security-schemes"><tr><th>Scheme</th><th>Credential</th>'
           "<th>Description</th></tr>"]  # fmt: skip
    for name, scheme in schemes.items():
        if scheme.get("type") == "apiKey":
            credential = f"API key in the <code>{escape(str(scheme.get('name', '')))}</code> header"
        else:
            credential = f"<code>Authorization: Bearer</code> {escape(str(scheme.get('bearerFormat', 'token')))}"
        out.append(f'<tr class="security-scheme" id="security-{escape(name)}"><td><code>{escape(name)}</code></td>'
                   f"<td>{credential}</td><td>{escape(str(scheme.get('description', '')))}</td></tr>")  # fmt: skip
    out.append("</table>")
    return "\n".join(out)


def _security(requirements: list[Mapping[str, list[str]]]) -> str:
    """Who may call: `public`, or each way in (any one suffices) with its scopes."""
    if not requirements:
        return '<p class="security">Security: public</p>'
    ways = []
    for requirement in requirements:
        parts = []
        for name, scopes in requirement.items():
            needed = f" (scopes: {escape(' '.join(scopes))})" if scopes else ""
            parts.append(f'<a href="#security-{escape(name)}">{escape(name)}</a>{needed}')
        ways.append(" and ".join(parts))
    return '<p class="security">Security: ' + " or ".join(ways) + "</p>"


def _media_schema(content: Mapping[str, Any] | None) -> Any:
    """The schema of the one media type of a `content` map."""
    for media in (content or {}).values():
        return media.get("schema", {})
    return {}


def _schema_section(name: str, schema: Mapping[str, Any]) -> str:
    out = [f'<section class="schema" id="schema-{escape(name)}"><h3>{escape(name)}</h3>']
    if schema.get("description"):
        out.append(f"<p>{escape(str(schema['description']))}</p>")
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        required = set(schema.get("required", ()))
        out.append("<table><tr><th>Field</th><th>Type</th><th>Required</th><th>Details</th></tr>")
        for field, field_schema in properties.items():
            out.append(
                f"<tr><td><code>{escape(field)}</code></td><td>{_type(field_schema)}</td>"
                f"<td>{'yes' if field in required else 'no'}</td><td>{_details(field_schema)}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append(f"<p>{_type(schema)} {_details(schema)}</p>")
    out.append("</section>")
    return "\n".join(out)


def _type(schema: Any) -> str:
    """A schema as a short type text; references link to their component."""
    if not isinstance(schema, Mapping) or not schema:
        return "any"
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith(COMPONENT_REF):
        name = reference[len(COMPONENT_REF) :]
        return f'<a href="#schema-{escape(name)}">{escape(name)}</a>'
    if "anyOf" in schema:
        return " | ".join(_type(member) for member in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"<code>{escape(json.dumps(value))}</code>" for value in schema["enum"])
    kinds = schema.get("type")
    texts = []
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "array":
            texts.append(f"array of {_type(schema.get('items'))}")
        elif kind == "object" and "additionalProperties" in schema and "properties" not in schema:
            texts.append(f"map of {_type(schema['additionalProperties'])}")
        elif kind == "string" and "format" in schema:
            texts.append(f"string ({escape(str(schema['format']))})")
        elif kind is not None:
            texts.append(escape(str(kind)))
    return " | ".join(texts) or "any"


def _details(schema: Any) -> str:
    """Keywords beyond the type (description, default, constraints) as compact JSON."""
    if not isinstance(schema, Mapping):
        return ""
    skip = {"type", "items", "additionalProperties", "properties", "required", "$ref", "anyOf", "format"}
    rest = {key: value for key, value in schema.items() if key not in skip}
    if not rest:
        return ""
    return f"<pre>{escape(json.dumps(rest, ensure_ascii=False, sort_keys=True))}</pre>"
