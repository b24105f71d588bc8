/**
 * Path parameters arrive as raw segments (API Gateway passes them still percent-encoded, and so
 * does the local adapter). They are decoded once here; a malformed escape (`%`, `%E0%A4%A`, a
 * lone surrogate) is not an error of ours but an id that names nothing: `null`, which the
 * resource middleware answers with 404 like any other malformed id (D43).
 */
export function decodePathParam(raw: string): string | null {
  try {
    // decodeURIComponent also refuses encoded lone surrogates (`%ED%A0%80`).
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

/** Every parameter decoded; an undecodable one is left out, so a handler never sees it. */
export function decodePathParams(raw: Record<string, string> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw ?? {})) {
    const d = decodePathParam(v);
    if (d !== null) out[k] = d;
  }
  return out;
}
