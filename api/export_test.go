package api

// What the external tests (package api_test) reach inside the package.

// CampaignInput is campaignInput: a test runs a campaign's batch activity
// with the input its workflow would get.
var CampaignInput = campaignInput

// LedgerMargin is ledgerMargin: a dedup test waits it out.
const LedgerMargin = ledgerMargin
