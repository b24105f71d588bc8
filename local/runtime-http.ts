/**
 * The local runtime's HTTP front (startRuntime, local/runtime.ts): the API of the route manifest and
 * the local pages (the payment provider's checkout, the CDN), bound before the handlers'
 * environment is set (it needs the URL) and answering once the runtime marks itself ready.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { localCheckoutPage } from '../shared/payments/local-checkout-page';
import { longPollTimeoutSeconds } from '../shared/manifest/timeouts';
import { localCdnPage } from './cdn';
import { deployedLongPollSeconds, deployedWafRatePer5Min, deployedWafSignupRatePer5Min } from './deployed-settings';
import { createHttpServer, registerLocalPage } from './http';
import { STAGE_THROTTLE } from '../shared/http/edge';
import type { StartContext } from './runtime-options';
import type { Stop } from './runtime-stops';

export interface HttpFront {
  server: Server;
  url: string;
  /** Lets the requests that wait through: the environment is set and everything has started. */
  markReady: () => void;
  /** The long-poll budget the front holds long polls for (the handlers are told it too). */
  longPollSeconds: number;
}

/** Binds the HTTP port (`opts.port`, default 3000) and pushes the stop that closes every connection. */
export async function startHttpFront(ctx: StartContext): Promise<HttpFront> {
  const { opts, log, host, stops } = ctx;
  // Bind the port first (PUBLIC_BASE_URL needs it); requests wait until the environment is set.
  let markReady!: () => void;
  const ready = new Promise<void>((r) => (markReady = r));
  const longPollSeconds = opts.longPollSeconds ?? deployedLongPollSeconds();
  const server = createHttpServer({
    log,
    ready,
    timeouts: { longPollMs: longPollTimeoutSeconds(longPollSeconds).fn * 1000, ...opts.integrationTimeouts },
    wafRates: opts.wafRateLimits ?? { perIpPer5Min: deployedWafRatePer5Min(), signupPerIpPer5Min: deployedWafSignupRatePer5Min() },
    throttle: opts.stageThrottle ?? STAGE_THROTTLE,
  });
  // The local payment provider's hosted checkout page (D32).
  stops.push(registerLocalPage(localCheckoutPage));
  // D60: signed download URLs under <url>/cdn, checked as CloudFront checks them.
  stops.push(registerLocalPage(localCdnPage));
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(opts.port ?? 3000, host, () => ok());
  });
  stops.push(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  );
  const url = `http://${host}:${(server.address() as AddressInfo).port}`;
  return { server, url, markReady, longPollSeconds };
}

/** The stop that closes the API to new requests; those running finish. */
export function stopTakingRequests(server: Server): Stop {
  return () => {
    server.close();
    server.closeIdleConnections();
  };
}
