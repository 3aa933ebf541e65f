/**
 * RFC 6962 / RFC 9162 Merkle trees as custody's log uses them (DESIGN §5):
 * leaf hash SHA-256(0x00 || leaf), node hash SHA-256(0x01 || left || right),
 * and the verification of inclusion and consistency proofs (RFC 9162
 * §2.1.3.2 and §2.1.4.2). Indexes and sizes are BigInt inside, so that no
 * step depends on JavaScript's 32-bit bitwise operators.
 */
import { createHash } from "node:crypto";
import { equalBytes } from "./encoding.js";

/** leafHash is SHA-256(0x00 || leaf). */
export function leafHash(leaf: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(Buffer.from([0])).update(leaf).digest());
}

/** nodeHash is SHA-256(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(Buffer.from([1])).update(left).update(right).digest());
}

function big(n: number | bigint, what: string): bigint {
  if (typeof n === "bigint") return n;
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${what} ${n} is not a tree index`);
  return BigInt(n);
}

/**
 * rootFromInclusion computes the root an inclusion proof leads to, or
 * throws if the proof's length does not fit the index and size.
 */
export function rootFromInclusion(index: number | bigint, size: number | bigint, leaf: Uint8Array, proof: Uint8Array[]): Uint8Array {
  let fn = big(index, "index");
  let sn = big(size, "size") - 1n;
  if (fn > sn) throw new Error(`index ${index} is beyond the tree of size ${size}`);
  let r = leaf;
  for (const p of proof) {
    if (p.length !== 32) throw new Error("a proof hash is not 32 bytes");
    if (sn === 0n) throw new Error("the inclusion proof is too long");
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new Error("the inclusion proof is too short");
  return r;
}

/** verifyInclusion throws unless proof shows leafHash at index in the tree of size with root. */
export function verifyInclusion(index: number | bigint, size: number | bigint, leaf: Uint8Array, proof: Uint8Array[], root: Uint8Array): void {
  const got = rootFromInclusion(index, size, leaf, proof);
  if (!equalBytes(got, root)) throw new Error(`the inclusion proof of leaf ${index} in the tree of size ${size} leads to another root`);
}

/**
 * verifyConsistency throws unless proof shows that the tree of size1 with
 * root1 is a prefix of the tree of size2 with root2.
 */
export function verifyConsistency(size1: number | bigint, size2: number | bigint, proof: Uint8Array[], root1: Uint8Array, root2: Uint8Array): void {
  const s1 = big(size1, "size"), s2 = big(size2, "size");
  if (s2 < s1) throw new Error(`size ${s2} is smaller than size ${s1}: a log never shrinks`);
  if (s1 === s2) {
    if (proof.length !== 0) throw new Error("a consistency proof between equal sizes must be empty");
    if (!equalBytes(root1, root2)) throw new Error(`two different roots for the tree of size ${s1}`);
    return;
  }
  if (s1 === 0n) {
    if (proof.length !== 0) throw new Error("a consistency proof from the empty tree must be empty");
    return;
  }
  if (proof.length === 0) throw new Error("empty consistency proof");
  for (const p of proof) if (p.length !== 32) throw new Error("a proof hash is not 32 bytes");
  let path = proof;
  if ((s1 & (s1 - 1n)) === 0n) path = [root1, ...proof];
  let fn = s1 - 1n;
  let sn = s2 - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new Error("the consistency proof is too long");
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      while ((fn & 1n) === 0n && fn !== 0n) {
        fn >>= 1n;
        sn >>= 1n;
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new Error("the consistency proof is too short");
  if (!equalBytes(fr, root1)) throw new Error(`the consistency proof does not lead to the root of size ${s1}`);
  if (!equalBytes(sr, root2)) throw new Error(`the consistency proof does not lead to the root of size ${s2}`);
}
