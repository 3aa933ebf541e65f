/** Strict encodings shared by the modules: base64 and hex as custody writes them. */

const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * decodeBase64Strict reads standard base64 (RFC 4648 §4) with padding and
 * nothing else: no line breaks, no URL alphabet, and no stray bits in the
 * final character (the re-encoding must equal the input), as Go's
 * base64.StdEncoding.Strict() decodes it.
 */
export function decodeBase64Strict(s: string): Uint8Array {
  if (!B64.test(s)) throw new Error("invalid standard base64");
  const b = Buffer.from(s, "base64");
  if (b.toString("base64") !== s) throw new Error("non-canonical base64 (stray padding bits)");
  return new Uint8Array(b);
}

export function toBase64(b: Uint8Array): string {
  return Buffer.from(b).toString("base64");
}

export function toHex(b: Uint8Array): string {
  return Buffer.from(b).toString("hex");
}

export function isLowerHex64(s: string): boolean {
  return /^[0-9a-f]{64}$/.test(s);
}

export function utf8(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, "utf8"));
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

/** anySignal is AbortSignal.any (Node >= 20.3), with a fallback for older 20.x. */
export function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as unknown as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any(signals);
  const c = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}
