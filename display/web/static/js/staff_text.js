// The staff's words for the table's alarm codes, where a page shows alarms to people who
// read a report rather than watch the floor (/reports). The pit keeps the codes its users
// act on (and filters by); the message of each alarm says the rest.
// tests/display/test_reports.py checks that every alarm of rules/alarms.py has words.

export const ALARM_WORDS = {
  DISCONNECTED: "Device disconnected",
  MODE_MISMATCH: "Shuffler set to another game",
  DECK_FAULT: "Deck check failed",
  DEVICE_FAULT_OTHER: "Further device faults",
  UNEXPECTED_FRAME: "Message the game does not use",
  LATE_FRAME: "Message for a closed round",
  LINK_ERRORS: "Errors on the device's link",
  ROLL_BACKLOG: "Rolls waiting behind a check",
  CLOCK_JUMP: "The table's clock jumped",
  JOURNAL_FAULT: "The journal cannot write",
  DISK_LOW: "The journal's disk is nearly full",
  MQTT_LOGIN_REFUSED: "The broker refused the table's login",
  SOFTWARE: "Software not approved",
};

// An alarm code in words: a device's own fault code (DEVICE_FAULT_<code>) as the device
// names it, in lower case; a code without words as it came (nothing better to say).
export function alarmWords(code) {
  if (ALARM_WORDS[code]) return ALARM_WORDS[code];
  const fault = /^DEVICE_FAULT_(.+)$/.exec(code || "");
  if (fault) return `Device fault: ${fault[1].toLowerCase().replaceAll("_", " ")}`;
  return code || "";
}
