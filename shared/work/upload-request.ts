/**
 * The upload and retry routes' request (D24, D25, D61): the body schemas, the multipart form and
 * its device fields, and which way in a request takes (multipart → direct upload, 202; JSON →
 * pre-signed URLs, 200). The uploads themselves are ./uploads.ts.
 */
import * as z from '../zod';
import { errors } from '../errors';
import { assertSendableText } from '../sendable-text';
import type { MutationContext } from '../context';
import { MAX_SIZE_BYTES } from '../media/sniff';
import { issuesToDetails } from '../http/middlewares/validate';
import type { DeviceFields, SubmissionItem } from './model';
import { parseMultipart } from './multipart';
import { isMultipart, MAX_MULTIPART_BODY_BYTES, multipartTooLarge } from './upload-limits';
import { uploadDirect, uploadPresigned, type UploadMode } from './uploads';

/** A form field holding decimal degrees (`-12.5`); empty or blank counts as not sent. */
function decimalField(min: number, max: number) {
  return z.pipe(
    z.pipe(
      z.string(),
      z.transform((v) => (v.trim() === '' ? undefined : v.trim())),
    ),
    z.optional(z.pipe(z.string().check(z.regex(/^-?\d+(\.\d+)?$/, { message: 'Expected decimal degrees, such as 48.8584.' })), z.pipe(z.transform(Number), z.number().check(z.gte(min), z.lte(max), z.storable())))),
  );
}

/** D24 optional multipart fields sent by the worker's app. */
export const deviceFieldsSchema = z.strictObject({
  captured_at: z.optional(z.iso.datetime({ offset: true })),
  device_model: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(200))),
  device_os: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(200))),
  app_version: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(100))),
  // Decimal degrees as text; an empty field is no position (never 0,0, which a job's radius would reject).
  latitude: z.optional(decimalField(-90, 90)),
  longitude: z.optional(decimalField(-180, 180)),
});

export function parseDeviceFields(fields: Record<string, string>): DeviceFields {
  const r = deviceFieldsSchema.safeParse(fields);
  if (!r.success) throw errors.validation('The upload form fields are invalid.', issuesToDetails(r.error.issues));
  return r.data;
}

export const presignRequestSchema = z.strictObject({
  files: z
    .array(
      z.strictObject({
        filename: z.string().check(z.trim(), z.minLength(1), z.maxLength(255)),
        content_type: z.string().check(z.minLength(3), z.maxLength(100)),
        size_bytes: z.int().check(z.gte(1)),
      }),
    )
    .check(z.minLength(1), z.maxLength(5)),
  captured_at: z.optional(z.iso.datetime({ offset: true })),
  device_model: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(200))),
  device_os: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(200))),
  app_version: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(100))),
  latitude: z.optional(z.number().check(z.gte(-90), z.lte(90), z.storable())),
  longitude: z.optional(z.number().check(z.gte(-180), z.lte(180), z.storable())),
});
export type PresignRequest = z.infer<typeof presignRequestSchema>;

/** Body schema of the upload routes: JSON asks for pre-signed URLs; a multipart body validates as `{}`. */
export const uploadBodySchema = z.extend(presignRequestSchema, { files: z.optional(presignRequestSchema.shape.files) });

/** Largest multipart file accepted at all (the category limits of D25 apply per file). */
const MAX_MULTIPART_FILE = Math.max(...Object.values(MAX_SIZE_BYTES)) + 1;

/** The upload and retry routes: multipart → direct (202), JSON → pre-signed URLs (200). */
export async function handleUploadRequest(
  ctx: MutationContext,
  sub: SubmissionItem,
  mode: UploadMode,
  req: { headers: Record<string, string>; rawBody: Buffer | null; body: z.infer<typeof uploadBodySchema> },
): Promise<{ status: number; body: unknown }> {
  const ct = req.headers['content-type'] ?? '';
  if (isMultipart(ct)) {
    // D61: above 4 MiB a deployed function would not even receive the body; nothing is stored.
    if ((req.rawBody?.length ?? 0) > MAX_MULTIPART_BODY_BYTES) throw multipartTooLarge();
    const parsed = await parseMultipartBody(req.rawBody ?? Buffer.alloc(0), ct);
    const unknown = parsed.files.find((f) => f.field !== 'file');
    if (unknown) throw errors.validation(`Unknown file field "${unknown.field}"; send files in the \`file\` field.`, [{ field: unknown.field, message: 'unknown field', code: 'unknown_field' }]);
    const tooBig = parsed.files.find((f) => f.truncated);
    if (tooBig) throw errors.validation(`File ${tooBig.filename} is too large.`, [{ field: 'file', message: 'too large', code: 'file_too_large' }]);
    // Text an event could not carry through SQS is refused, as in JSON bodies (shared/sendable-text.ts).
    assertSendableText(parsed.fields);
    parsed.files.forEach((f) => assertSendableText({ filename: f.filename }, 'file'));
    const device = parseDeviceFields(parsed.fields);
    const body = await uploadDirect(ctx, sub, mode, parsed.files.map((f) => ({ filename: f.filename, contentType: f.contentType, data: f.data })), device);
    return { status: 202, body };
  }
  if (!req.body.files) {
    throw errors.validation('Send the file as multipart/form-data (field `file`), or JSON {files:[{filename, content_type, size_bytes}]} for pre-signed upload URLs.', [
      { field: 'files', message: 'required', code: 'missing_file' },
    ]);
  }
  return { status: 200, body: await uploadPresigned(ctx, sub, mode, { ...req.body, files: req.body.files }) };
}

async function parseMultipartBody(raw: Buffer, ct: string) {
  return parseMultipart(raw, ct, { files: 5, fileSize: MAX_MULTIPART_FILE });
}
