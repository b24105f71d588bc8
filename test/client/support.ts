/** Client tests: a fetch that checks every API answer against the OpenAPI document too. */
import { checkContract } from '../support/contract';

export function contractFetch(baseUrl: string, log: { method: string; url: string; headers: Record<string, string> }[] = []): typeof fetch {
  return async (input, init) => {
    const url = String(input);
    const headers = Object.fromEntries(Object.entries((init?.headers ?? {}) as Record<string, string>).map(([k, v]) => [k.toLowerCase(), v]));
    const method = init?.method ?? 'GET';
    log.push({ method, url, headers });
    const res = await fetch(input, init);
    if (url.startsWith(baseUrl)) {
      const text = await res.clone().text();
      let json: unknown = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch {
        json = null;
      }
      checkContract(method, url.slice(baseUrl.length), { status: res.status, headers: Object.fromEntries(res.headers), text, json });
    }
    return res;
  };
}
