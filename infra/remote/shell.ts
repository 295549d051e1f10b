// Quoting for the remote shell: values reach scripts through the environment, quoted.

/** `export A='x' B='y';` with single-quote escaping. */
export function envPrefix(env: Record<string, string>): string {
  const parts = Object.entries(env).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new Error(`invalid environment variable name: ${k}`);
    return `${k}=${shellQuote(v)}`;
  });
  return parts.length ? `export ${parts.join(" ")}; ` : "";
}

export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
