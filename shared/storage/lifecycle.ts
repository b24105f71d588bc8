/**
 * How long the bucket keeps rejected bytes (the lifecycle rule on the `verdict=rejected` tag,
 * lib/data.ts), counted by S3 from the upload. The override window is 7 days from the verdict
 * (D71), and a verdict can come days after its upload (a scoring message retried, dead-lettered and
 * redriven: the queues keep a message up to 4 days, their dead-letter queues 14), so the bytes are
 * kept 30 days: 7 for the window, the rest for a late verdict. An override that finds them gone
 * anyway refuses to approve (nothing to deliver, nothing charged).
 */
export const REJECTED_RETENTION_DAYS = 30;

/**
 * Amazon Transcribe's output documents (`transcripts/`) are read once, when their job completes
 * (the transcript then lives in the submission's part and the File's annotations): the bucket
 * deletes them after this many days.
 */
export const TRANSCRIPT_RETENTION_DAYS = 30;
