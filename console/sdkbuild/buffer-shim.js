// The SDK writes bytes with Node's Buffer; in the browser bundle the
// global Buffer is the "buffer" package's (esbuild's inject), taught
// Node's "base64url" encoding, which that package lacks: unpadded on
// output, and on input read as base64 after mapping - and _ back (the SDK
// checks strictness itself by encoding again and comparing).
import { Buffer } from "buffer";

const toString = Buffer.prototype.toString;
Buffer.prototype.toString = function (encoding, ...rest) {
  if (encoding === "base64url") {
    return toString.call(this, "base64").replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  return toString.call(this, encoding, ...rest);
};
const from = Buffer.from;
Buffer.from = function (value, encoding, ...rest) {
  if (typeof value === "string" && encoding === "base64url") {
    return from.call(this, value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  }
  return from.call(this, value, encoding, ...rest);
};

export { Buffer };
