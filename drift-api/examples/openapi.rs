//! Prints the OpenAPI document of the drift API:
//! `cargo run -p drift-api --example openapi > openapi.json`.

fn main() {
    match serde_json::to_string_pretty(&drift_api::openapi::document()) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("cannot encode the document: {e}");
            std::process::exit(1);
        }
    }
}
