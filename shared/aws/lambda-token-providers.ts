/**
 * The bearer-token providers of `@aws-sdk/token-providers` as the deployed bundles carry them: the
 * house bundling (lib/constructs/house-function.ts) aliases the package to this module.
 *
 * The Bedrock runtime client offers two auth schemes: Signature V4 with the function's role, which
 * it chooses first and which every function here uses (the stack grants `bedrock:InvokeModel` to
 * the role), and a bearer token, read from `AWS_BEARER_TOKEN_BEDROCK` or else from an SSO token
 * file. The SSO provider brings the SSO OIDC client into every bundle with a Bedrock client (about
 * 20 KB, parsed at every cold start of the scoring, annotation and transcription consumers), for
 * a scheme no deployed function can use: a Lambda function has no SSO token file.
 *
 * Kept: the environment variable (same name and behaviour as the SDK's provider). Anything else
 * refuses, as the SDK's chain does when it finds no token. Local runs and tests are not bundled
 * and use the SDK's providers.
 */
import { TokenProviderError } from '@smithy/core/config';
import type { TokenIdentity, TokenIdentityProvider } from '@smithy/types';

type Init = { logger?: { debug?: (m: string) => void }; signingName?: string };

/** The token in `AWS_BEARER_TOKEN_<SIGNING NAME>`, as the SDK's provider reads it. */
export const fromEnvSigningName =
  ({ logger, signingName }: Init = {}): TokenIdentityProvider =>
  async (): Promise<TokenIdentity> => {
    if (!signingName) throw new TokenProviderError("Please pass 'signingName' to compute environment variable key", { logger: logger as never });
    const key = `AWS_BEARER_TOKEN_${signingName.replace(/[\s-]/g, '_').toUpperCase()}`;
    if (!(key in process.env)) throw new TokenProviderError(`Token not present in '${key}' environment variable`, { logger: logger as never });
    return { token: process.env[key]! };
  };

/** What the SDK's `nodeProvider` would fall back to (an SSO token file) does not exist in Lambda. */
export const nodeProvider =
  (init: Init = {}): TokenIdentityProvider =>
  async (): Promise<TokenIdentity> => {
    throw new TokenProviderError('No bearer token: deployed functions sign their calls with their role; SSO token files are not read', {
      logger: init.logger as never,
      tryNextLink: false,
    });
  };
