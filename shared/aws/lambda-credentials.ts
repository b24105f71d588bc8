/**
 * The AWS SDK's default credential provider as the deployed bundles carry it: the house bundling
 * (lib/constructs/house-function.ts) aliases `@aws-sdk/credential-provider-node` to this module.
 *
 * A Lambda function gets its execution role's credentials in the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). The SDK's own chain first looks for a profile, SSO, a
 * credential process and a web identity token file, and so brings the STS, SSO, SSO OIDC and
 * Sign-in clients into every bundle (about 125 KB of a route's bundle, loaded at every cold
 * start; docs/benchmarks.md). This chain keeps what can apply to a function: the environment,
 * then a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI / _RELATIVE_URI),
 * with the SDK's own providers for both and the SDK's memoization (credentials without an expiry
 * are kept; ones that expire within 5 minutes are read again before they are used, where the SDK's
 * chain would refresh them in the background).
 *
 * Local runs and tests are not bundled and use the SDK's chain.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';
import { fromHttp } from '@aws-sdk/credential-provider-http';
import { CredentialsProviderError, chain, memoize } from '@smithy/core/config';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';

type Init = Parameters<typeof fromEnv>[0] & Parameters<typeof fromHttp>[0];

/** As @aws-sdk/credential-provider-node: credentials with an expiry are refreshed, others kept. */
export const credentialsWillNeedRefresh = (c: AwsCredentialIdentity): boolean => c?.expiration !== undefined;
/** Treated as expired 5 minutes before they expire (the SDK chain's margin). */
export const credentialsTreatedAsExpired = (c: AwsCredentialIdentity): boolean =>
  c?.expiration !== undefined && c.expiration.getTime() - Date.now() < 300_000;

/** What the SDK clients call as `credentialDefaultProvider` (same name and shape as the SDK's). */
export const defaultProvider = (init: Init = {}): AwsCredentialIdentityProvider =>
  memoize(
    chain(
      fromEnv(init),
      // fromHttp refuses at once (next link) when neither container variable is set.
      async () => fromHttp(init)(),
      async () => {
        throw new CredentialsProviderError(
          'No AWS credentials: this bundle reads them from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ' +
            'AWS_SESSION_TOKEN, as Lambda sets them) or a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI ' +
            'or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI); profiles, SSO and web identity files are not read by deployed functions',
          { logger: init.logger, tryNextLink: false },
        );
      },
    ),
    credentialsTreatedAsExpired,
    credentialsWillNeedRefresh,
  );
