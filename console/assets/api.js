// What the workflow pages share: where the API is, reading it, and making
// elements whose text is set with textContent (never parsed as markup).

// The API sits next to the console: /console/ -> /v1/..., and
// /logs/NAME/console/ -> /logs/NAME/v1/....
export const api = new URL("../", document.baseURI);

export async function getJSON(path, signal) {
  const r = await fetch(new URL(path, api), { signal, headers: { Accept: "application/json" }, credentials: "same-origin" });
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const why = body && (body.reason || body.error) ? (body.reason_code ? body.reason_code + ": " : "") + (body.reason || body.error) : r.status + " " + r.statusText;
    throw new Error(why);
  }
  return body;
}

export function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

export function status(node, cls, text) {
  node.className = cls;
  node.textContent = text;
}
