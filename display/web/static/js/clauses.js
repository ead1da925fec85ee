// 68 IAC 10-4-4(c): the rolls the stickperson may declare invalid (the regulation's text,
// shortened), and the dice reader's CHECK reasons for the clauses it can see
// (dice-reader-icd.md). The reader cannot see (2), (3) and (6): those are void_roll's.

export const CLAUSES = {
  1: "one die comes to rest on top of the other",
  2: "a patron other than the shooter throws the dice",
  3: "the dice do not leave the shooter's hand simultaneously",
  4: "one or both dice come to rest in the dice bowl",
  5: "one or both dice come to rest on the rail",
  6: "the shooter has not placed a pass or don't pass bet",
  7: "the dice are thrown in the wrong direction",
  8: "the dice are slid so that they do not roll or tumble",
  9: "one or both dice rest on chips, not flat on the table",
  10: "no good faith attempt to hit the backboard, thrown short",
  11: "it cannot be determined which face is uppermost",
};

export const CHECK_REASONS = {
  STACKED: 1,
  BOWL: 4,
  RAIL: 5,
  WRONG_DIRECTION: 7,
  SLID: 8,
  ON_CHIPS: 9,
  SHORT_THROW: 10,
  UNREADABLE: 11,
};

export const VOID_CLAUSES = ["2", "3", "6"];

// The clause of a CHECK's reason as the daemon words it ("ON_CHIPS (68 IAC ...): ..."),
// from the reader's code at its start; null when it names none.
export function clauseOf(reason) {
  const code = (reason || "").match(/^[A-Z_]+/);
  return code && CHECK_REASONS[code[0]] ? CHECK_REASONS[code[0]] : null;
}
