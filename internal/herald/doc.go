// Package herald owns Herald's domain words: channel names, delivery and
// notification statuses, suppression reasons, error types, the retry policy a
// tenant may override and the rule that sums channel statuses into a
// notification's status. Every layer (api, workflows, activities, providers,
// store) imports it; it imports nothing of Herald's, so the words are defined
// once and a workflow can use them without pulling in the database.
package herald
