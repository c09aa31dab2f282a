/**
 * A self-contained API reference page: it loads the OpenAPI document and lists every
 * operation with its parameters, body and responses. No external assets, so it works offline.
 */
export function apiReferencePage(openApiPath: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Webhooks API v2 reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:24px;color:#1f2328}
h1{margin-bottom:0}.op{border:1px solid #d0d7de;border-radius:8px;margin:16px 0;padding:12px 16px}
.m{display:inline-block;min-width:64px;font-weight:700;text-transform:uppercase}
.get{color:#0969da}.post{color:#1a7f37}.patch{color:#9a6700}.delete{color:#cf222e}
code,pre{font:13px ui-monospace,monospace;background:#f6f8fa;border-radius:4px}pre{padding:8px;overflow:auto}
</style></head><body>
<h1>Webhooks API v2</h1><p>Raw document: <a href="${openApiPath}">${openApiPath}</a>. Authenticate with <code>Authorization: Bearer &lt;API_TOKEN&gt;</code>.</p>
<div id="ops">Loading…</div>
<script type="module">
const doc = await (await fetch(${JSON.stringify(openApiPath)})).json();
const esc = (s) => String(s).replace(/[&<>"]/g, (ch) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'})[ch]);
const ref = (schema) => schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
const html = [];
for (const [path, ops] of Object.entries(doc.paths)) {
  for (const [method, op] of Object.entries(ops)) {
    const body = op.requestBody?.content?.['application/json']?.schema;
    html.push('<div class="op"><div><span class="m ' + method + '">' + method + '</span> <code>' + esc(path) + '</code></div>'
      + '<p>' + esc(op.summary ?? '') + '</p>'
      + ((op.parameters ?? []).length ? '<p>Parameters: ' + op.parameters.map((p) => '<code>' + esc(p.name) + '</code> (' + p.in + ')').join(', ') + '</p>' : '')
      + (body ? '<details><summary>Request body</summary><pre>' + esc(JSON.stringify(ref(body), null, 2)) + '</pre></details>' : '')
      + '<details><summary>Responses</summary><ul>' + Object.entries(op.responses).map(([s, r]) => '<li><b>' + s + '</b> ' + esc(r.description) + '</li>').join('') + '</ul></details></div>');
  }
}
document.getElementById('ops').innerHTML = html.join('');
</script></body></html>`;
}
