import { synthesize } from '../test/cdk/support';
const s = synthesize();
const sizes = new Map<string, number>();
for (const [, t] of (s as any).templates ?? []) {
  for (const [id, r] of Object.entries<any>(t.resources)) {
    if (r.Type !== 'AWS::IAM::Policy') continue;
    for (const role of r.Properties.Roles ?? []) {
      const k = JSON.stringify(role);
      sizes.set(k, (sizes.get(k) ?? 0) + JSON.stringify(r.Properties.PolicyDocument).length);
    }
  }
}
console.log([...sizes.entries()].sort((a, b) => b[1] - a[1]).slice(0, 4));
