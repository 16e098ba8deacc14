// libFuzzer supplies main(); this translation unit only exists so the fuzz target links alone.
