// One text per value, whatever order its keys were built in: what a record's digest and its
// signature are computed over. Object keys sorted by UTF-16 code units (never by locale),
// no whitespace, strings and numbers as JSON writes them; keys whose value is undefined are
// left out, as JSON.stringify does. Anything JSON cannot carry exactly is refused.

export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`canonicalJson: ${value} has no JSON form`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value))
    return (
      "[" +
      value
        .map((v, i) => {
          if (v === undefined) throw new TypeError(`canonicalJson: element ${i} is undefined`);
          return canonicalJson(v);
        })
        .join(",") +
      "]"
    );
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return "{" + entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",") + "}";
  }
  throw new TypeError(`canonicalJson: a ${typeof value} has no JSON form`);
}
