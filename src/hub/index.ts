/**
 * The WebSub hub (W3C WebSub Recommendation) of resourcesync: standalone (`resourcesync hub`) or mounted in
 * `serve`.
 *
 * @module
 */
export type { DeliveryEvent, DeliveryOptions } from './delivery.js';
export { createHub, type Hub, type HubEvent, type HubOptions } from './hub.js';
export { type Subscription, SubscriptionStore } from './store.js';
export { attachSourceNotifications, type SourceNotifications, type SourceNotificationsOptions } from './attach.js';
