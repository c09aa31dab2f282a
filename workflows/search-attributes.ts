import { defineSearchAttributeKey } from '@temporalio/common';

/** Custom search attributes of delivery workflows, for finding deliveries in the Web UI. */
export const WebhookIdAttribute = defineSearchAttributeKey('WebhookId', 'KEYWORD');
export const ProjectIdAttribute = defineSearchAttributeKey('ProjectId', 'KEYWORD');
export const EventTypeAttribute = defineSearchAttributeKey('EventType', 'KEYWORD');
export const DeliveryStatusAttribute = defineSearchAttributeKey('DeliveryStatus', 'KEYWORD');

/** Every custom search attribute, with the type the server registers it under. */
export const SEARCH_ATTRIBUTES = [
  WebhookIdAttribute,
  ProjectIdAttribute,
  EventTypeAttribute,
  DeliveryStatusAttribute,
] as const;
