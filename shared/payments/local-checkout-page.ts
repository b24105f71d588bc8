/**
 * The local payment provider's hosted checkout page (D32), mounted by the local runtime's HTTP
 * server (`registerLocalPage`). `GET /checkout/{cs_id}` shows the amount, bonus and a Pay button;
 * `POST /checkout/{cs_id}/pay` confirms through the provider and redirects back (303), so a double
 * click or a replayed POST finds the session paid and applies nothing twice.
 * The session id is the capability, as with hosted checkout pages of card processors.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isId } from '../ids';
import { getSession } from '../billing/checkout-session';
import { confirmCheckout } from '../billing/confirm-checkout';
import { paymentProvider } from '../billing/provider';
import { logger } from '../logger';
import { now } from '../clock';
import { decodePathParam } from '../http/params';

const PATH = /^\/checkout\/([^/]+)(\/pay)?\/?$/;

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const usd = (cents: number) => `$${(cents / 100).toFixed(2)}`;

function page(res: ServerResponse, status: number, title: string, body: string): void {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem}
dl{display:grid;grid-template-columns:auto auto;gap:.4rem 1rem}dd{margin:0;text-align:right}
button{font-size:1.1rem;padding:.6rem 2rem}</style></head>
<body><h1>${esc(title)}</h1>${body}</body></html>`;
  res.writeHead(status, {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
    'Content-Length': String(Buffer.byteLength(html)),
  });
  res.end(html);
}

function summary(s: Record<string, unknown>): string {
  return `<dl>
<dt>Amount</dt><dd id="amount">${usd(Number(s.amount_cents))}</dd>
<dt>Bonus credits</dt><dd id="bonus">${usd(Number(s.bonus_cents))}</dd>
<dt>Credits granted</dt><dd id="total">${usd(Number(s.total_credits_cents))}</dd>
</dl>`;
}

async function show(res: ServerResponse, id: string): Promise<void> {
  const s = await getSession(id);
  if (!s) return page(res, 404, 'Checkout not found', '<p>No such checkout session.</p>');
  if (s.status === 'paid') return page(res, 200, 'Payment received', `${summary(s)}<p id="status">Paid. The credits are in your balance.</p>`);
  if (new Date(s.expires_at as string).getTime() <= now().getTime()) {
    return page(res, 410, 'Checkout expired', `${summary(s)}<p id="status">This checkout session has expired; start a new purchase.</p>`);
  }
  page(
    res,
    200,
    'Buy credits',
    `${summary(s)}<form method="post" action="/checkout/${esc(id)}/pay"><button id="pay" type="submit">Pay ${usd(Number(s.amount_cents))}</button></form>
<p><small>Local test payment provider: no card is charged.</small></p>`,
  );
}

async function pay(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
  req.resume(); // the form body carries nothing we need
  const s = await getSession(id);
  if (!s) return page(res, 404, 'Checkout not found', '<p>No such checkout session.</p>');
  const provider = paymentProvider();
  const r = await confirmCheckout(id, { paymentMethod: provider.paymentMethodFor(s.org_id as string), providerRef: `local_checkout_${id}` });
  logger.info('local checkout paid', { checkout_session_id: id, outcome: r.outcome });
  res.writeHead(303, { Location: `/checkout/${id}`, 'Content-Length': '0' });
  res.end();
}

/** node:http handler: answers /checkout/* and returns true; anything else returns false. */
export async function localCheckoutPage(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const m = PATH.exec(new URL(req.url ?? '/', 'http://local').pathname);
  if (!m) return false;
  const id = decodePathParam(m[1]!) ?? ''; // a malformed escape names no session: 404, not a crash
  try {
    if (!isId('checkoutSession', id)) page(res, 404, 'Checkout not found', '<p>No such checkout session.</p>');
    else if (!m[2] && req.method === 'GET') await show(res, id);
    else if (m[2] && req.method === 'POST') await pay(req, res, id);
    else {
      res.writeHead(405, { Allow: m[2] ? 'POST' : 'GET', 'Content-Length': '0' });
      res.end();
    }
  } catch (err) {
    logger.error('local checkout page failed', { error: err as Error });
    if (!res.headersSent) page(res, 500, 'Something went wrong', '<p>Please retry.</p>');
  }
  return true;
}
