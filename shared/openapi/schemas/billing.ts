/** Responses of the billing routes. */
import * as z from 'zod';
import { cents, id, ts } from './common';

export const balance = z
  .looseObject({
    object: z.literal('credit_balance'),
    available_cents: cents,
    held_cents: cents,
    total_cents: cents,
    balance_cents: cents.describe('The same value as available_cents (the name a variant of the spec uses)'),
    currency: z.literal('usd'),
    updated_at: ts,
  })
  .meta({ id: 'CreditBalance' });

export const TRANSACTION_TYPES = ['purchase', 'deduction', 'free_tier', 'bonus', 'expiration', 'refund', 'escrow', 'reversal'] as const;

export const transaction = z
  .looseObject({
    id: id('crtx'),
    object: z.literal('credit_transaction'),
    type: z.enum(TRANSACTION_TYPES),
    amount_cents: cents.describe('Signed: money leaving available is negative'),
    description: z.string(),
    job_id: z.string().optional(),
    submission_id: z.string().optional(),
    expires_at: ts.optional(),
    created_at: ts,
  })
  .meta({ id: 'CreditTransaction' });

export const checkoutSession = z
  .looseObject({
    object: z.literal('checkout_session'),
    id: id('cs'),
    status: z.string().describe("`open` until paid, then `paid`. A test key's purchase is `paid` at once (test mode: nothing is charged)."),
    checkout_url: z
      .string()
      .nullable()
      .describe("The hosted payment page (Stripe's, deployed); null for a test key's purchase, which needs no payment"),
    amount_cents: cents,
    bonus_cents: cents,
    total_credits_cents: cents,
    expires_at: ts,
  })
  .meta({ id: 'CheckoutSession' });
