package action

// ClaimSQL is the claim statement, for its plan test.
const ClaimSQL = claimSQL
