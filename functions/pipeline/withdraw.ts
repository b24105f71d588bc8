import { messageConsumer } from '../../shared/work/consumer';
import { deleteWithdrawnObjects, withdrawnSubmissionOf } from '../../shared/work/withdrawn-objects';

/** Queue `withdrawals` (D71): an override withdrew approved Files → their objects are deleted. */
export const handler = messageConsumer('withdrawals', withdrawnSubmissionOf, deleteWithdrawnObjects);
