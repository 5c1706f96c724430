package action

// ClaimSQL is the claim statement, for its plan test.
const ClaimSQL = claimSQL

// ClaimOrderedSQL is the ordered claim statement, for its plan test.
const ClaimOrderedSQL = claimOrderedSQL
