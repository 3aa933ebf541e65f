// Who is at this page, for choosing which buttons to show. The ledger
// decides what it accepts whatever the page shows: a hidden button is still
// a statement anyone with a key may send, and a shown one may be denied.
//
// The person is the one signed in (GET /console/session: the session's
// passkey, session.js), or else the passkey file chosen on the console's
// first page (kept in localStorage), as the log binds its key. Only
// currentPrincipal knows where the person comes from.
import { keyId } from "./sign.js";
import { getJSON } from "./api.js";

// The kinds a passkey enrolled without allowed_types may sign (DESIGN §1).
const defaultTypes = ["APPROVAL", "RESUME", "STOP"];

async function session() {
  try {
    const r = await fetch(new URL("session", document.baseURI), { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!r.ok) return null; // a console without sign-in
    const s = await r.json();
    return s.signed_in && s.passkey ? s : null;
  } catch {
    return null;
  }
}

// currentPrincipal returns {name, role, keyid, passkey, allowedTypes, via},
// or null when nobody usable is here (no session and no passkey chosen, or
// a key the log does not bind or has retired).
export async function currentPrincipal() {
  const s = await session();
  let passkey, allowed, via;
  if (s) {
    passkey = s.passkey;
    allowed = s.allowed_types;
    via = "signed in";
  } else {
    const text = localStorage.getItem("custody.passkey");
    if (!text) return null;
    try {
      passkey = JSON.parse(text);
    } catch {
      return null;
    }
    allowed = passkey.allowed_types;
    via = "passkey file";
  }
  let keyid;
  try {
    keyid = keyId(passkey);
  } catch {
    return null;
  }
  const ks = await getJSON("v1/keys/" + keyid + "/seq");
  if (!ks.bound || ks.retired) return null;
  const allowedTypes = Array.isArray(allowed) && allowed.length ? allowed : defaultTypes;
  return { name: ks.name, role: ks.role, keyid, passkey, allowedTypes, via };
}

// The rules of DESIGN §4 (Who may do what), as far as the page can tell
// them from the replay report; the ledger's decision is the one that counts.
export function mayStop(me, report) {
  if (!me || !me.allowedTypes.includes("STOP")) return false;
  if (me.role === "admin" || (report.owner && report.owner === me.name)) return true;
  return (report.grants || []).some((g) => !g.denied && g.grantee === me.name && !g.revoked && !g.expired);
}

export function mayResume(me, report, stop) {
  if (!me || !me.allowedTypes.includes("RESUME") || stop.resumed) return false;
  if (me.role === "admin") return true;
  if (stop.role === "admin") return false;
  return stop.by === me.name || (stop.role === "grantee" && report.owner === me.name);
}

export function mayRevoke(me, report, grant) {
  if (!me || !me.allowedTypes.includes("REVOKE") || grant.denied || grant.revoked) return false;
  if (me.role === "admin") return true;
  if (!grant.revocable) return false;
  const byId = new Map((report.grants || []).filter((g) => !g.denied).map((g) => [g.id, g]));
  if (grant.grantee === me.name) return true;
  for (let g = grant; g; g = g.parent ? byId.get(g.parent) : undefined) {
    if (g.issuer === me.name) return true;
  }
  return false;
}
