use super::*;

#[test]
fn only_a_bearer_token_of_bounded_length_is_read() {
    let with = |v: &str| {
        let mut h = axum::http::HeaderMap::new();
        h.insert(header::AUTHORIZATION, v.parse().expect("header"));
        bearer(&h).map(str::to_owned)
    };
    assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
    assert_eq!(with("bearer  abc ").as_deref(), Some("abc"));
    assert_eq!(with("Basic abc"), None);
    assert_eq!(with("Bearer "), None);
    assert_eq!(with(&format!("Bearer {}", "x".repeat(MAX_TOKEN + 1))), None);
    assert_eq!(bearer(&axum::http::HeaderMap::new()), None);
}
