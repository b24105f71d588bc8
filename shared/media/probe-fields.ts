/**
 * The fields the pipeline needs from an ffprobe result (video, and audio music-metadata could not
 * fully read): dimensions, duration, fps, codecs, audio format, rotation, and from the container's tags:
 * - captured_at: the QuickTime `com.apple.quicktime.creationdate` tag (has an offset), else
 *   `creation_time` (UTC). null when absent.
 * - device_model / device_os from the QuickTime make, model and software tags (normalised as EXIF's).
 * - latitude/longitude from the QuickTime ISO 6709 location tag.
 */
import { num, parseRate, type ProbeResult } from './ffmpeg';
import { clean, deviceModel, normalizeOffset, validLatLon } from './exif';

/** '+48.8584+002.2945+035.000/' → {lat, lon}. */
export function parseIso6709(s: string | undefined): { latitude: number; longitude: number } | null {
  if (!s) return null;
  const m = /^([+-]\d+(?:\.\d+)?)([+-]\d+(?:\.\d+)?)/.exec(s.trim());
  if (!m) return null;
  const lat = Number(m[1]);
  const lon = Number(m[2]);
  return validLatLon(lat, lon) ? { latitude: lat, longitude: lon } : null;
}

/** QuickTime '2024-05-17T10:11:12+0200' / ISO 'Z' → ISO 8601 with ±HH:MM. */
export function normalizeIsoWithOffset(s: string | undefined): string | null {
  if (!s) return null;
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?\s*(Z|[+-]\d{2}:?\d{2})?$/.exec(s.trim());
  if (!m) return null;
  const frac = m[3] ? m[3].slice(0, 4).padEnd(4, '0') : '';
  const off = m[4] ? normalizeOffset(m[4]) : null;
  return `${m[1]}T${m[2]}${frac}${off ?? ''}`;
}

export interface ProbeFields {
  width: number | null;
  height: number | null;
  duration_seconds: number | null;
  fps: number | null;
  codec: string | null;
  audio_codec: string | null;
  channels: number | null;
  sample_rate: number | null;
  bit_rate: number | null;
  has_video: boolean;
  has_audio: boolean;
  rotation: number | null;
  captured_at: string | null;
  device_model: string | null;
  device_os: string | null;
  latitude: number | null;
  longitude: number | null;
  format_name: string | null;
}

/** The fields the pipeline needs from an ffprobe result. Cover art (attached_pic) is not video. */
export function probeFields(p: ProbeResult): ProbeFields {
  const video = p.streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
  const audio = p.streams.find((s) => s.codec_type === 'audio');
  const tags = { ...(p.format.tags ?? {}) };
  const tag = (k: string) => tags[k] ?? tags[k.toLowerCase()];
  const loc = parseIso6709(tag('com.apple.quicktime.location.ISO6709') ?? tag('location'));
  const rotation = video?.side_data_list?.find((d) => typeof d.rotation === 'number')?.rotation as number | undefined;
  const duration = num(p.format.duration) ?? num(video?.duration) ?? num(audio?.duration);
  return {
    width: video?.width ?? null,
    height: video?.height ?? null,
    duration_seconds: duration === null ? null : round3(duration),
    fps: video ? parseRate(video.avg_frame_rate) ?? parseRate(video.r_frame_rate) : null,
    codec: video?.codec_name ?? audio?.codec_name ?? null,
    audio_codec: audio?.codec_name ?? null,
    channels: audio?.channels ?? null,
    sample_rate: num(audio?.sample_rate),
    bit_rate: num(p.format.bit_rate),
    has_video: !!video,
    has_audio: !!audio,
    rotation: rotation ?? (video?.tags?.rotate ? Number(video.tags.rotate) : null),
    captured_at: normalizeIsoWithOffset(tag('com.apple.quicktime.creationdate')) ?? normalizeIsoWithOffset(tag('creation_time')),
    device_model: deviceModel(tag('com.apple.quicktime.make'), tag('com.apple.quicktime.model')),
    device_os: clean(tag('com.apple.quicktime.software')),
    latitude: loc?.latitude ?? null,
    longitude: loc?.longitude ?? null,
    format_name: p.format.format_name ?? null,
  };
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
