// Package herald owns Herald's domain words: channel names, delivery and
// notification statuses, suppression reasons, error types, the retry policy a
// tenant may override and the rule that sums channel statuses into a
// notification's status. Every layer (api, workflows, activities, providers,
// store) imports it; it imports nothing of Herald's, so the words are defined
// once and a workflow can use them without pulling in the database.
//
// The words an argument list could swap are named string types: Channel,
// DeliveryStatus, NotificationStatus, Reason and Lane. The compiler refuses a
// reason passed as a status, while JSON, SQL and Temporal payloads carry them
// as the plain strings they always were (workflow histories replay unchanged).
// Convert at the edges only: a request's fields, provider wire formats, SQL
// text arrays, metric labels.
package herald
