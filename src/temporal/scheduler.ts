import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  type Client,
} from '@temporalio/client';
import { deliveryWorkflow, retrySignal } from '../../workflows/delivery.ts';
import {
  DeliveryStatusAttribute,
  EventTypeAttribute,
  ProjectIdAttribute,
  WebhookIdAttribute,
} from '../../workflows/search-attributes.ts';

/** What a delivery workflow is started with; all of it is safe to show in the Web UI. */
export interface DeliveryStart {
  deliveryId: string;
  webhookId: string;
  projectId: string;
  event: string;
  /** The webhook URL; only its host goes into the workflow summary. */
  url: string;
}

/** Starts, signals and cancels delivery workflows (workflow id = delivery id). */
export class DeliveryScheduler {
  constructor(
    private readonly client: Client,
    private readonly taskQueue: string,
  ) {}

  #options(start: DeliveryStart) {
    return {
      workflowId: start.deliveryId,
      taskQueue: this.taskQueue,
      args: [{ deliveryId: start.deliveryId }] as [{ deliveryId: string }],
      typedSearchAttributes: [
        { key: WebhookIdAttribute, value: start.webhookId },
        { key: ProjectIdAttribute, value: start.projectId },
        { key: EventTypeAttribute, value: start.event },
        { key: DeliveryStatusAttribute, value: 'pending' },
      ],
      staticSummary: `${start.event} → ${new URL(start.url).host}`,
    };
  }

  /**
   * Starts the workflow of each delivery. Idempotent: a running workflow is kept
   * (USE_EXISTING) and a closed one is not run again (REJECT_DUPLICATE).
   */
  async start(starts: readonly DeliveryStart[]): Promise<void> {
    await Promise.all(
      starts.map(async (start) => {
        try {
          await this.client.workflow.start(deliveryWorkflow, {
            ...this.#options(start),
            workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
            workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          });
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        }
      }),
    );
  }

  /** Sends the retry signal, starting a new run if the workflow has closed. */
  async retry(start: DeliveryStart): Promise<void> {
    await this.client.workflow.signalWithStart(deliveryWorkflow, {
      ...this.#options(start),
      signal: retrySignal,
      signalArgs: [],
    });
  }

  /** Cancels the workflows of deliveries that no longer exist. */
  async cancel(deliveryIds: readonly string[]): Promise<void> {
    await Promise.all(
      deliveryIds.map(async (deliveryId) => {
        try {
          await this.client.workflow.getHandle(deliveryId).cancel();
        } catch (error) {
          if (!(error instanceof WorkflowNotFoundError)) throw error;
        }
      }),
    );
  }
}
