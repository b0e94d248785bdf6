/**
 * Change and Framework Notifications (ResourceSync Notification, N-§2–§6; 2017 Change/Framework Notification
 * over W3C WebSub): payloads, WebSocket channels (server and client), WebSub publisher and subscriber.
 *
 * @module
 */
export type {
  ChannelConnected,
  ChannelDisconnected,
  NotificationEvent,
  NotificationReceived,
  NotificationRefused,
} from './events.js';
export {
  findNotificationEndpoints,
  type NotificationEndpoints,
  noChannelError,
} from './follow.js';
export { findLink, formatWebSubLinks, parseLinkHeader, type WebLink } from '../http/link.js';
export { signBody, verifySignature } from './http-util.js';
export {
  mountRequestHandler,
  type NotificationUrls,
  type SetChange,
  SourceNotifier,
  type SourceNotifierOptions,
} from './notifier.js';
export {
  type ChangeNotification,
  type ChangeNotificationOptions,
  createChangeEntry,
  createChangeNotifications,
  createFrameworkEntry,
  createFrameworkNotification,
  DEFAULT_NOTIFICATION_MAX_BYTES,
  DEFAULT_NOTIFICATION_MAX_ENTRIES,
  FRAMEWORK_CHANGE_TYPES,
  type FrameworkCapability,
  type FrameworkChange,
  type FrameworkNotification,
  type Notification,
  type ReadNotificationOptions,
  type ResourceChange,
  readNotification,
} from './payloads.js';
export {
  CLOSE_GOING_AWAY,
  CLOSE_TOO_SLOW,
  type Channel,
  type ChannelEvent,
  ChannelServer,
  type ChannelServerOptions,
  channelEntries,
  channelUrls,
  TOO_SLOW_REASON,
  toWebSocketUrl,
} from './websocket.js';
export { ChannelClient, type ChannelClientOptions, connectChannel } from './websocket-client.js';
export { type PublishResult, WebSubPublisher, type WebSubPublisherOptions } from './websub-publisher.js';
export { WebSubSubscriber, type WebSubSubscriberOptions } from './websub-subscriber.js';
