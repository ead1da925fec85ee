// Generated from the Python package `contract` by `make schemas` (python -m contract.esmodule).
// Do not edit: tests/contract/test_esmodule.py fails when this file is stale.

// The MQTT contract (docs/reference/mqtt.md).
export const CONTRACT_VERSION = "1.4";

// Every JSON topic under a table's base topic, and whether it is retained.
export const TOPICS = Object.freeze({
  "info": {
    "retained": true
  },
  "state": {
    "retained": true
  },
  "alarms": {
    "retained": true
  },
  "cover_all/payouts": {
    "retained": true
  },
  "cover_all/result": {
    "retained": true
  },
  "craps/board": {
    "retained": true
  },
  "craps/roll": {
    "retained": false
  },
  "craps/result": {
    "retained": false
  },
  "craps/reversal": {
    "retained": false
  },
  "bust_bonus/state": {
    "retained": true
  },
  "bust_bonus/result": {
    "retained": true
  }
});

// Every topic under a table's base topic, by name: a page never spells one.
export const TOPIC = Object.freeze({
  "AVAILABILITY": "availability",
  "INFO": "info",
  "STATE": "state",
  "ALARMS": "alarms",
  "COVER_ALL_PAYOUTS": "cover_all/payouts",
  "COVER_ALL_RESULT": "cover_all/result",
  "CRAPS_BOARD": "craps/board",
  "CRAPS_ROLL": "craps/roll",
  "CRAPS_RESULT": "craps/result",
  "CRAPS_REVERSAL": "craps/reversal",
  "BUST_BONUS_STATE": "bust_bonus/state",
  "BUST_BONUS_RESULT": "bust_bonus/result"
});

// Each game family's own topics (poker: the games with a Cover All Bonus).
export const FAMILY_TOPICS = Object.freeze({
  "poker": [
    "cover_all/payouts",
    "cover_all/result"
  ],
  "BJ": [
    "bust_bonus/state",
    "bust_bonus/result"
  ],
  "CRAPS": [
    "craps/board",
    "craps/roll",
    "craps/result",
    "craps/reversal"
  ]
});

// The topics a table's last result is read from, in the order preferred.
export const RESULTS = Object.freeze([
  "cover_all/result",
  "bust_bonus/result",
  "craps/result",
  "craps/roll"
]);

// The topics whose earlier messages a page keeps, besides the latest.
export const HISTORY_TOPICS = Object.freeze([
  "alarms",
  "bust_bonus/result",
  "cover_all/result",
  "craps/result",
  "craps/roll"
]);

// Messages kept per table and history topic.
export const HISTORY = 50;

// Each game a table plays, as people name it.
export const GAMES = Object.freeze({
  "CSP": "Caribbean Stud Poker",
  "FCP": "Four Card Poker",
  "LIR": "Let It Ride",
  "MSP": "Mississippi Stud",
  "TCP": "Three Card Poker",
  "UTH": "Ultimate Texas Hold'em",
  "BJ": "Blackjack",
  "CRAPS": "Craps"
});

// The games with a Cover All Bonus.
export const POKER_GAMES = Object.freeze([
  "CSP",
  "FCP",
  "LIR",
  "MSP",
  "TCP",
  "UTH"
]);

// The Bonus Craps bets as the seed names them.
export const BETS = Object.freeze({
  "all_small": "All Small",
  "all_tall": "All Tall",
  "make_em_all": "Make 'Em All"
});

// 68 IAC 10-4-4(c): the rolls the stickperson may declare invalid (shortened).
export const CLAUSES = Object.freeze({
  "1": "one die comes to rest on top of the other",
  "2": "a patron other than the shooter throws the dice",
  "3": "the dice do not leave the shooter's hand simultaneously",
  "4": "one or both dice come to rest in the dice bowl",
  "5": "one or both dice come to rest on the rail",
  "6": "the shooter has not placed a pass or don't pass bet",
  "7": "the dice are thrown in the wrong direction",
  "8": "the dice are slid so that they do not roll or tumble",
  "9": "one or both dice rest on chips, not flat on the table",
  "10": "no good faith attempt to hit the backboard, thrown short",
  "11": "it cannot be determined which face is uppermost"
});

// The clauses request/void_roll declares (the reader cannot see them).
export const VOID_CLAUSES = Object.freeze([
  "2",
  "3",
  "6"
]);

// Round and roll ids run from 1 to this.
export const MAX_ID = 999999;
