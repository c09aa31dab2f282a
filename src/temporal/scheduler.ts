import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowNotFoundError,
  type Client,
  type WorkflowExecutionDescription,
} from '@temporalio/client';
import { bulkRetryWorkflow } from '../../workflows/bulk-retry.ts';
import { deliveryWorkflow, retrySignal, sendTurnSignal, type DeliveryWorkflowInput } from '../../workflows/delivery.ts';
import {
  DeliveryStatusAttribute,
  EventTypeAttribute,
  ProjectIdAttribute,
  WebhookIdAttribute,
} from '../../workflows/search-attributes.ts';
import { DEFAULT_BULK_RETRY_RATE } from '../config.ts';

/** What a delivery workflow is started with; all of it is safe to show in the Web UI. */
export interface DeliveryStart {
  deliveryId: string;
  webhookId: string;
  projectId: string;
  event: string;
  /** The webhook URL; only its host goes into the workflow summary. */
  url: string;
}

/** Calls to Temporal in flight at once for one request: the workflow starts of one event, the cancellations of a deleted webhook's deliveries. */
const CALLS_AT_ONCE = 200;

/** How a {@link DeliveryScheduler} starts workflows. */
export interface SchedulerOptions {
  /**
   * Deliveries per second a project's bulk retry operations signal at most, together
   * (BULK_RETRY_RATE), so a recovering endpoint is not hit by a thundering herd.
   */
  bulkRetryRate?: number;
  /**
   * A worker of the task queue polls on the client's own `NativeConnection` (the embedded
   * mode): delivery workflows are started eagerly, their first task handed to that worker in
   * the answer to the start instead of through the task queue.
   */
  eagerStart?: boolean;
}

/** Starts, signals and cancels delivery workflows (workflow id = delivery id) and bulk retry operations. */
export class DeliveryScheduler {
  private readonly client: Client;
  private readonly taskQueue: string;
  private readonly bulkRetryRate: number;
  private readonly eagerStart: boolean;

  constructor(client: Client, taskQueue: string, options: SchedulerOptions = {}) {
    this.client = client;
    this.taskQueue = taskQueue;
    this.bulkRetryRate = options.bulkRetryRate ?? DEFAULT_BULK_RETRY_RATE;
    this.eagerStart = options.eagerStart ?? false;
  }

  #options(start: DeliveryStart) {
    return {
      workflowId: start.deliveryId,
      taskQueue: this.taskQueue,
      args: [{ deliveryId: start.deliveryId, statusWhileOpen: true }] as [DeliveryWorkflowInput],
      typedSearchAttributes: [
        { key: WebhookIdAttribute, value: start.webhookId },
        { key: ProjectIdAttribute, value: start.projectId },
        { key: EventTypeAttribute, value: start.event },
        { key: DeliveryStatusAttribute, value: 'pending' },
      ],
      staticSummary: `${start.event} → ${new URL(start.url).host}`,
      // Its workflow tasks are dispatched fairly across projects, as its sends are (docs/architecture.md, "Isolation").
      priority: { fairnessKey: start.projectId },
    };
  }

  /**
   * Starts the workflow of each delivery. Idempotent: a running workflow is kept
   * (USE_EXISTING) and a closed one is not run again (REJECT_DUPLICATE).
   */
  async start(starts: readonly DeliveryStart[]): Promise<void> {
    // A project's many webhooks: at most CALLS_AT_ONCE calls at once.
    for (let first = 0; first < starts.length; first += CALLS_AT_ONCE) await this.#startEach(starts.slice(first, first + CALLS_AT_ONCE));
  }

  async #startEach(starts: readonly DeliveryStart[]): Promise<void> {
    await Promise.all(
      starts.map(async (start) => {
        try {
          await this.client.workflow.start(deliveryWorkflow, {
            ...this.#options(start),
            workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
            workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
            requestEagerStart: this.eagerStart,
          });
        } catch (error) {
          if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
        }
      }),
    );
  }

  /**
   * Sends the retry signal, starting a new run if the workflow has closed. With a `key` (a bulk
   * retry operation's id) a repeat of the same signal is ignored by the workflow.
   */
  async retry(start: DeliveryStart, key?: string): Promise<void> {
    await this.client.workflow.signalWithStart(deliveryWorkflow, {
      ...this.#options(start),
      signal: retrySignal,
      signalArgs: key ? [{ key }] : [],
    });
  }

  /**
   * Where a delivery's workflow stands, for the repair check: `none` (never started), `closed`,
   * `waiting_for_retry` (open, in its dead-letter wait) or `running` (on its way).
   */
  async deliveryWorkflowState(deliveryId: string): Promise<'none' | 'closed' | 'waiting_for_retry' | 'running'> {
    const description = await this.#describe(deliveryId);
    if (description === 'none') return 'none';
    if (description.status.name !== 'RUNNING') return 'closed';
    return description.typedSearchAttributes.get(DeliveryStatusAttribute) === 'dead_letter' ? 'waiting_for_retry' : 'running';
  }

  /** Where the workflow of a bulk retry operation stands: `none` when it was never started. */
  async operationWorkflowState(operationId: string): Promise<'none' | 'closed' | 'running'> {
    const description = await this.#describe(operationId);
    if (description === 'none') return 'none';
    return description.status.name === 'RUNNING' ? 'running' : 'closed';
  }

  /** The workflow's description, or `none` when Temporal does not know it. */
  async #describe(workflowId: string): Promise<WorkflowExecutionDescription | 'none'> {
    try {
      return await this.client.workflow.getHandle(workflowId).describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return 'none';
      throw error;
    }
  }

  /** Starts the workflow of a bulk retry operation (workflow id = operation id); one already started is left as it is. */
  async startRetryOperation(operation: { id: string; webhookId: string; projectId: string }): Promise<void> {
    try {
      await this.client.workflow.start(bulkRetryWorkflow, {
        workflowId: operation.id,
        taskQueue: this.taskQueue,
        args: [{ operationId: operation.id, ratePerSecond: this.bulkRetryRate }],
        typedSearchAttributes: [
          { key: WebhookIdAttribute, value: operation.webhookId },
          { key: ProjectIdAttribute, value: operation.projectId },
        ],
        staticSummary: `bulk retry of ${operation.webhookId}, ${this.bulkRetryRate}/s for its project`,
        // Its workflow and activity tasks are dispatched fairly across projects, as deliveries are.
        priority: { fairnessKey: operation.projectId },
      });
    } catch (error) {
      // Started already (by the repair check, its API request having taken long): it runs.
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    }
  }

  /**
   * Asks a bulk retry operation's workflow to stop; it records itself `cancelled`. False when no
   * workflow of it runs (never started, or closed without recording its end).
   */
  async cancelOperation(operationId: string): Promise<boolean> {
    // A closed workflow takes a cancellation without a word: asked first whether it runs.
    if ((await this.operationWorkflowState(operationId)) !== 'running') return false;
    try {
      await this.client.workflow.getHandle(operationId).cancel();
      return true;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return false;
      throw error;
    }
  }

  /**
   * Tells the workflows of deliveries that were waiting for their places that it is their turn.
   * Answers the deliveries whose workflow has closed meanwhile (their place in line can go).
   */
  async wakeForTurn(deliveryIds: readonly string[]): Promise<string[]> {
    const closed = await Promise.all(
      deliveryIds.map(async (deliveryId) => {
        try {
          await this.client.workflow.getHandle(deliveryId).signal(sendTurnSignal);
          return undefined;
        } catch (error) {
          if (error instanceof WorkflowNotFoundError) return deliveryId;
          throw error;
        }
      }),
    );
    return closed.filter((deliveryId) => deliveryId !== undefined);
  }

  /** Cancels the workflows of deliveries that no longer exist, at most CALLS_AT_ONCE calls at once. */
  async cancel(deliveryIds: readonly string[]): Promise<void> {
    for (let first = 0; first < deliveryIds.length; first += CALLS_AT_ONCE) {
      await Promise.all(
        deliveryIds.slice(first, first + CALLS_AT_ONCE).map(async (deliveryId) => {
          try {
            await this.client.workflow.getHandle(deliveryId).cancel();
          } catch (error) {
            if (!(error instanceof WorkflowNotFoundError)) throw error;
          }
        }),
      );
    }
  }
}
