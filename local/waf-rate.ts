/**
 * The web ACL's per-IP rate-based rules (lib/edges/waf.ts), as the local HTTP front applies them.
 *
 * Deployed, WAF counts each address's requests over the last five minutes, first on the signup
 * routes (`SignupRatePerIp`), then on every route (`RatePerIp`), and once an address is past a
 * rule's limit it blocks that address's further requests with 429 and Retry-After until its count
 * in the window falls back under the limit. A request the first rule blocks goes no further, so the
 * second does not count it; blocked requests still count for the rule that saw them (they are
 * requests from that address). Here the count is exact and the block immediate, from the request
 * after the limit; WAF checks the rate often but not on every request and "does not guarantee an
 * exact limit match", so it may let a burst past the limit for a few seconds: the local front is the
 * stricter of the two. The limits are the deployment's (local/deployed-settings.ts).
 *
 * The signup rule counts each signup route apart (its keys are the address and the path, D44:
 * buyers' and workers' signup limits are separate), and here, as for the functions' own signup
 * limits, a loopback address is exempt from it (D44); the rule on every route counts it.
 */
import { SIGNUP_PATHS, WAF_RATE_LIMITED, WAF_RATE_WINDOW_SECONDS, type EdgeAnswer } from '../shared/http/edge';
import { isLoopbackAddress } from '../shared/webhooks/ssrf';

export interface WafRateLimits {
  /** Requests per address in five minutes, on every route (`wafRatePer5Min`). */
  perIpPer5Min: number;
  /** Requests per address in five minutes, on the signup routes (`wafSignupRatePer5Min`). */
  signupPerIpPer5Min: number;
}

/** One address's request times under one rule, oldest first (a queue with a moving head). */
class Window {
  private times: number[] = [];
  private head = 0;

  /** Counts a request at `now` and answers how many the window holds with it. */
  add(now: number, windowMs: number): number {
    while (this.head < this.times.length && this.times[this.head]! <= now - windowMs) this.head++;
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
    this.times.push(now);
    return this.times.length - this.head;
  }

  /** Whether nothing of the window is left at `now`. */
  emptyAt(now: number, windowMs: number): boolean {
    return this.times.length === 0 || this.times[this.times.length - 1]! <= now - windowMs;
  }
}

/**
 * The rules as one check: `(address, path)` → the block's answer, or null to let the request on.
 * `now` is the clock (tests move it).
 */
export function wafRateRules(limits: WafRateLimits, now: () => number = Date.now): (ip: string, pathname: string) => EdgeAnswer | null {
  const windowMs = WAF_RATE_WINDOW_SECONDS * 1000;
  const windows = new Map<string, Window>();
  let checks = 0;
  const over = (rule: string, ip: string, limit: number, at: number): boolean => {
    const key = `${rule} ${ip}`;
    let w = windows.get(key);
    if (!w) windows.set(key, (w = new Window()));
    return w.add(at, windowMs) > limit;
  };
  return (ip, pathname) => {
    const at = now();
    // Addresses not seen for a whole window are forgotten now and then.
    if (++checks % 4096 === 0) for (const [key, w] of windows) if (w.emptyAt(at, windowMs)) windows.delete(key);
    const signupPath = SIGNUP_PATHS.find((p) => pathname.endsWith(p));
    if (signupPath && !isLoopbackAddress(ip) && over(`signup ${signupPath}`, ip, limits.signupPerIpPer5Min, at)) return WAF_RATE_LIMITED;
    if (over('all', ip, limits.perIpPer5Min, at)) return WAF_RATE_LIMITED;
    return null;
  };
}
