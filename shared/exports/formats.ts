/**
 * The three export formats (D73), each an async generator of output chunks over the job's Files,
 * read page by page: nothing holds more than one page of Files and one chunk of output (COCO also
 * keeps a map from File id to its integer image id, a few dozen bytes per image).
 *
 * - JSONL: one line per File, exactly the File object of the files list (fresh 7-day URLs).
 * - CSV: a header row and one row per File of its scalar fields (device_info flattened to
 *   `device_info.*` columns); RFC 4180 quoting; a text cell that a spreadsheet would run as a
 *   formula (starting with = + - @, tab or CR) is prefixed with `'`.
 * - COCO: `info`, `licenses`, `images` (image Files, their size upright: EXIF orientation applied,
 *   as the boxes are), `annotations` (one per detected object with a
 *   box: `bbox` [x, y, width, height] in pixels, `area`, `iscrowd` 0, `score` = the detector's
 *   confidence) and `categories` (one per label, ids in order of first appearance). Two passes over
 *   the Files: images first, then annotations, restricted to the images of the first pass.
 */
import { presentFile } from '../files';
import type { AnnotatedObject } from '../media/annotation/derive';
import type { ExportFormat, ExportItem } from './model';

type Item = Record<string, unknown>;
/** Pages of File items of the export's job, oldest first, already filtered by min_score. */
export type FilePages = () => AsyncIterable<Item[]>;

export interface Counter {
  files: number;
  /**
   * A format that reads the files twice (COCO: images, then their annotations) found the two
   * readings different (a File approved or withdrawn in between): the build is made again.
   */
  changedBetweenReadings?: boolean;
}

export function encoder(format: ExportFormat, exp: ExportItem, pages: FilePages, count: Counter): AsyncGenerator<Buffer> {
  if (format === 'jsonl') return jsonl(pages, count);
  if (format === 'csv') return csv(pages, count);
  return coco(exp, pages, count);
}

const buf = (s: string) => Buffer.from(s, 'utf8');

/**
 * One JSONL record: JSON with U+2028, U+2029 and U+0085 escaped too (JSON allows them raw, but
 * line-splitting readers such as Python's `splitlines()` would cut the record there).
 */
export const jsonLine = (v: unknown) => JSON.stringify(v).replace(/[\u2028\u2029\u0085]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

async function* jsonl(pages: FilePages, count: Counter): AsyncGenerator<Buffer> {
  for await (const page of pages()) {
    const files = await Promise.all(page.map(presentFile));
    count.files += files.length;
    yield buf(files.map((f) => `${jsonLine(f)}\n`).join(''));
  }
}

// ---------------------------------------------------------------- CSV

type FileObject = Awaited<ReturnType<typeof presentFile>>;

/** The File's scalar fields, in the order of the File object. */
export const CSV_COLUMNS: { name: string; get: (f: FileObject) => unknown }[] = [
  { name: 'id', get: (f) => f.id },
  { name: 'job_id', get: (f) => f.job_id },
  { name: 'submission_id', get: (f) => f.submission_id },
  { name: 'original_filename', get: (f) => f.original_filename },
  { name: 'content_type', get: (f) => f.content_type },
  { name: 'size_bytes', get: (f) => f.size_bytes },
  { name: 'duration_seconds', get: (f) => f.duration_seconds },
  { name: 'width', get: (f) => f.width },
  { name: 'height', get: (f) => f.height },
  { name: 'content_hash', get: (f) => f.content_hash },
  { name: 'captured_at', get: (f) => f.captured_at },
  { name: 'ai_star_rating', get: (f) => f.ai_star_rating },
  { name: 'device_info.device_model', get: (f) => (f.device_info as Record<string, unknown> | null)?.device_model },
  { name: 'device_info.device_os', get: (f) => (f.device_info as Record<string, unknown> | null)?.device_os },
  { name: 'device_info.app_version', get: (f) => (f.device_info as Record<string, unknown> | null)?.app_version },
  { name: 'worker_region', get: (f) => f.worker_region },
  { name: 'perceptual_hash', get: (f) => f.perceptual_hash },
  { name: 'location_verified', get: (f) => f.location_verified },
  { name: 'download_url', get: (f) => f.download_url },
  { name: 'download_url_expires_at', get: (f) => f.download_url_expires_at },
  { name: 'created_at', get: (f) => f.created_at },
];

/** One CSV cell: empty for null, RFC 4180 quoting, and no formula a spreadsheet would run. */
export function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) || s !== s.trim() ? `"${s.replace(/"/g, '""')}"` : s;
}

const csvLine = (cells: unknown[]) => `${cells.map(csvCell).join(',')}\r\n`;

async function* csv(pages: FilePages, count: Counter): AsyncGenerator<Buffer> {
  yield buf(csvLine(CSV_COLUMNS.map((c) => c.name)));
  for await (const page of pages()) {
    const files = await Promise.all(page.map(presentFile));
    count.files += files.length;
    yield buf(files.map((f) => csvLine(CSV_COLUMNS.map((c) => c.get(f)))).join(''));
  }
}

// ---------------------------------------------------------------- COCO

const isImage = (f: Item) => typeof f.content_type === 'string' && f.content_type.startsWith('image/');

async function* coco(exp: ExportItem, pages: FilePages, count: Counter): AsyncGenerator<Buffer> {
  const info = {
    description: `Dataset export ${exp.id} of job ${exp.job_id}`,
    version: '1.0',
    year: Number(exp.created_at.slice(0, 4)),
    date_created: exp.created_at,
    job_id: exp.job_id,
    export_id: exp.id,
  };
  yield buf(`{"info":${JSON.stringify(info)},"licenses":[],"images":[`);
  const imageIds = new Map<string, number>();
  for await (const page of pages()) {
    const items = page.filter(isImage);
    const images = await Promise.all(items.map(presentFile));
    const parts: string[] = [];
    images.forEach((f, i) => {
      const id = imageIds.size + 1;
      imageIds.set(f.id, id);
      // The boxes are in pixels of the upright image (EXIF orientation applied), as loaders that
      // apply the orientation see it: its size is the stored one, sides swapped for 5–8.
      const turned = Number(items[i]!.orientation ?? 1) >= 5;
      parts.push(
        JSON.stringify({
          id,
          file_name: f.original_filename,
          width: turned ? f.height : f.width,
          height: turned ? f.width : f.height,
          date_captured: f.captured_at,
          coco_url: f.download_url,
          file_id: f.id,
          content_hash: f.content_hash,
          // False when no object detection ran on the image: no annotations then means "not
          // analysed", not "nothing found" (the File's annotations.unavailable says why).
          objects_detected: Array.isArray((items[i]!.annotations as { objects?: unknown } | null | undefined)?.objects),
        }),
      );
    });
    if (parts.length) yield buf(`${imageIds.size > parts.length ? ',' : ''}${parts.join(',')}`);
  }
  count.files = imageIds.size;
  yield buf('],"annotations":[');
  const categories = new Map<string, number>();
  let annId = 0;
  const seen = new Set<string>();
  for await (const page of pages()) {
    const parts: string[] = [];
    for (const f of page) {
      if (!isImage(f)) continue;
      const imageId = imageIds.get(f.id as string);
      if (imageId === undefined) {
        count.changedBetweenReadings = true; // approved after the first reading: not in `images`
        continue;
      }
      seen.add(f.id as string);
      const objects = ((f.annotations as { objects?: AnnotatedObject[] | null } | null)?.objects ?? []) as AnnotatedObject[];
      for (const o of objects) {
        if (!Array.isArray(o.bbox)) continue; // the model gave no box (e.g. positions only)
        let cat = categories.get(o.label);
        if (cat === undefined) categories.set(o.label, (cat = categories.size + 1));
        const [, , w, h] = o.bbox;
        parts.push(JSON.stringify({ id: ++annId, image_id: imageId, category_id: cat, bbox: o.bbox, area: Math.round(w * h * 100) / 100, iscrowd: 0, score: o.confidence }));
      }
    }
    if (parts.length) yield buf(`${annId > parts.length ? ',' : ''}${parts.join(',')}`);
  }
  if (seen.size !== imageIds.size) count.changedBetweenReadings = true; // one withdrawn in between: still in `images`
  const cats = [...categories].map(([name, id]) => ({ id, name, supercategory: 'object' }));
  yield buf(`],"categories":${JSON.stringify(cats)}}\n`);
}
