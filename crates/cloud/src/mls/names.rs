/// Names of the per-slot coefficient arrays, one per basis function (at most 55: 3-D, degree 5).
pub(crate) const COEFFICIENT_NAMES: [&str; 56] = [
    "mls_0", "mls_1", "mls_2", "mls_3", "mls_4", "mls_5", "mls_6", "mls_7", "mls_8", "mls_9",
    "mls_10", "mls_11", "mls_12", "mls_13", "mls_14", "mls_15", "mls_16", "mls_17", "mls_18",
    "mls_19", "mls_20", "mls_21", "mls_22", "mls_23", "mls_24", "mls_25", "mls_26", "mls_27",
    "mls_28", "mls_29", "mls_30", "mls_31", "mls_32", "mls_33", "mls_34", "mls_35", "mls_36",
    "mls_37", "mls_38", "mls_39", "mls_40", "mls_41", "mls_42", "mls_43", "mls_44", "mls_45",
    "mls_46", "mls_47", "mls_48", "mls_49", "mls_50", "mls_51", "mls_52", "mls_53", "mls_54",
    "mls_55",
];
