package api

// What the external tests (package api_test) reach inside the package.

// CampaignInput is campaignInput: a test runs a campaign's batch activity
// with the input its workflow would get.
var CampaignInput = campaignInput

// LedgerMargin is ledgerMargin: a dedup test waits it out.
const LedgerMargin = ledgerMargin

// UserHash is userHash: the tests compute a user hash as a tenant would.
var UserHash = userHash

// UserClaims are userClaims: the tests read a user token's claims.
type UserClaims = userClaims

// RequestIDHeader is requestIDHeader: the access log test sends one.
const RequestIDHeader = requestIDHeader
